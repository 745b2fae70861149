package leader

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/converge-go/converge/etcd/internal/etcdcluster"
)

// answerLoser lets the first create of an election key through to etcd
// and answers the caller Unavailable, as a member killed or a connection
// reset after the request was applied does.
type answerLoser struct {
	mu    sync.Mutex
	lease int64 // the lost create's lease; 0 until then
}

func (l *answerLoser) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	txn, ok := req.(*pb.TxnRequest)
	if !ok || err != nil || len(txn.Success) != 1 {
		return err
	}
	put := txn.Success[0].GetRequestPut()
	if put == nil || !strings.HasPrefix(string(put.Key), "/test/leader/") {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lease != 0 {
		return nil
	}
	l.lease = put.Lease
	return status.Error(codes.Unavailable, "answer lost by the test")
}

// Finding 7 for the election key: a create of the election key that etcd
// applied but whose answer was lost is adopted: the elector leads under
// that very key and lease, instead of starting a new session (and, with a
// standby before it, leaving the key to block the line until the lease
// ended).
func TestLostElectionCreateIsAdopted(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	loser := &answerLoser{}
	lossy, err := clientv3.New(clientv3.Config{
		Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(loser.intercept)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lossy.Close() })
	a, _ := startElector(t, lossy, "a", 10*time.Second)
	waitLeading(t, a, true)
	loser.mu.Lock()
	lost := loser.lease
	loser.mu.Unlock()
	if lost == 0 {
		t.Fatal("no create answer was lost: the test did not test anything")
	}
	tok, _ := a.Token()
	if int64(tok.Lease) != lost {
		t.Fatalf("leading under lease %x, the lost create's was %x: the key was not adopted", int64(tok.Lease), lost)
	}
	resp, err := c.Client(t).Get(context.Background(), tok.Key)
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != tok.Revision {
		t.Fatalf("the election key %s: %v, %v", tok, resp, err)
	}
}
