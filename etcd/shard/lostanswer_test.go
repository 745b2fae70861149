package shard

import (
	"context"
	"strconv"
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

// answerLoser is a client interceptor that lets the first claim
// transaction (a Txn of nested transactions) through to etcd and then
// answers the caller Unavailable, as a member killed or a connection reset
// after the request was applied does. clientv3 does not retry it.
type answerLoser struct {
	mu     sync.Mutex
	lost   bool
	lostAt time.Time
}

func (l *answerLoser) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	txn, ok := req.(*pb.TxnRequest)
	if !ok || err != nil || len(txn.Success) == 0 || txn.Success[0].GetRequestTxn() == nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost {
		return nil
	}
	l.lost, l.lostAt = true, time.Now()
	return status.Error(codes.Unavailable, "answer lost by the test")
}

func (l *answerLoser) at() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostAt, l.lost
}

// Finding 7 and row "claim answer lost" of the fault table: a claim that
// etcd applied but whose answer was lost is adopted as this replica's
// claim (the key is under its own lease), with the key's create revision
// as the token, within 2 s; the slots are not orphaned for the life of
// the lease.
func TestLostClaimAnswerIsAdopted(t *testing.T) {
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
	cli := c.Client(t)
	// A long TTL: the old code's orphaned slots would come back only
	// when the lease expires, far after the bound checked here.
	a := startMember(t, lossy, "a", func(cfg *Config) { cfg.TTL = 10 * time.Second })
	waitUntil(t, []*member{a}, balanced([]*member{a}))
	lostAt, lost := loser.at()
	if !lost {
		t.Fatal("no claim answer was lost: the test did not test anything")
	}
	took := time.Since(lostAt)
	t.Logf("every slot owned %v after the claim's answer was lost", took)
	if took > 2*time.Second {
		t.Fatalf("slots adopted only %v after the lost answer, want within 2s", took)
	}
	resp, err := cli.Get(context.Background(), "/test/shards/slots/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != testSlots {
		t.Fatalf("%d claim keys in etcd, want %d", len(resp.Kvs), testSlots)
	}
	for _, kv := range resp.Kvs {
		slot, _ := strconv.Atoi(strings.TrimPrefix(string(kv.Key), "/test/shards/slots/"))
		tok, ok := a.Token(slot)
		if !ok || tok.Revision != kv.CreateRevision || int64(tok.Lease) != kv.Lease {
			t.Fatalf("slot %d: token %v, etcd holds create revision %d under lease %x", slot, tok, kv.CreateRevision, kv.Lease)
		}
	}
}
