package leader

import (
	"context"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/converge-go/converge/etcd/internal/etcdcluster"
	"github.com/converge-go/converge/etcd/internal/etcdtest"
)

// lostCreate picks the create of an election key: a Txn putting one key
// under /test/leader/.
func lostCreate(txn *pb.TxnRequest) bool {
	if len(txn.Success) != 1 {
		return false
	}
	put := txn.Success[0].GetRequestPut()
	return put != nil && strings.HasPrefix(string(put.Key), "/test/leader/")
}

// Finding 7 for the election key: a create of the election key that etcd
// applied but whose answer was lost is adopted: the elector leads under
// that very key and lease, instead of starting a new session (and, with a
// standby before it, leaving the key to block the line until the lease
// ended).
func TestLostElectionCreateIsAdopted(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	loser := &etcdtest.LostAnswer{Match: lostCreate}
	lossy, err := clientv3.New(clientv3.Config{
		Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{loser.DialOption()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lossy.Close() })
	a, _ := startElector(t, lossy, "a", 10*time.Second)
	waitLeading(t, a, true)
	txn, ok := loser.Lost()
	if !ok {
		t.Fatal("no create answer was lost: the test did not test anything")
	}
	lost := txn.Request.Success[0].GetRequestPut().Lease
	tok, _ := a.Token()
	if int64(tok.Lease) != lost {
		t.Fatalf("leading under lease %x, the lost create's was %x: the key was not adopted", int64(tok.Lease), lost)
	}
	resp, err := c.Client(t).Get(context.Background(), tok.Key)
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != tok.Revision {
		t.Fatalf("the election key %s: %v, %v", tok, resp, err)
	}
}
