package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/converge-go/converge/etcd/fencing"
	"github.com/converge-go/converge/etcd/internal/etcdcluster"
	"github.com/converge-go/converge/etcd/internal/etcdtest"
)

// putsMark picks a Txn that puts an active mark.
func putsMark(txn *pb.TxnRequest) bool {
	for _, op := range txn.Success {
		if put := op.GetRequestPut(); put != nil && strings.Contains(string(put.Key), "/active/") {
			return true
		}
	}
	return false
}

// A mark that etcd applied but whose answer was lost is the operation's
// own, under its replica's lease: begin removes it, so the group's next
// owner (another replica) finds no operation running. Before, the mark
// stayed for the life of the lease, and every operation of the next
// owner on the group failed as an overlap.
func TestLostMarkAnswerLeavesNoMark(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	cli := c.Client(t)
	// The mark's Txn goes through to etcd; then the operation's context
	// is cancelled and the caller answered with the cancellation, as a
	// Prune whose owned slots changed while its mark was in flight sees
	// it: etcd applied the mark, the caller never learns it.
	var cancel context.CancelFunc
	loser := &etcdtest.LostAnswer{Match: putsMark, Answer: func(ctx context.Context) error {
		cancel()
		return status.FromContextError(ctx.Err()).Err()
	}}
	lossy, err := clientv3.New(clientv3.Config{
		Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{loser.DialOption()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lossy.Close() })

	bg, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	tok := claim(bg, t, cli, "/fleet/claims/r1")
	ctx, cancelOp := context.WithCancel(fencing.WithToken(bg, tok))
	defer cancelOp()
	cancel = cancelOp
	if _, err := cli.Put(bg, "/fleet/target/stray", `{"size":1}`); err != nil {
		t.Fatal(err)
	}
	r1 := &fleetTarget{cli: lossy, prefix: "/fleet", replica: "r1", callTime: time.Millisecond, running: map[string]bool{},
		acquire: func(ctx context.Context, _ []byte) (context.Context, func(), bool) { return ctx, func() {}, true }}
	if err := r1.Prune(ctx, nil, func(func(*Group, statedb.Revision) bool) {}); err == nil {
		t.Fatal("Prune with its mark's answer lost succeeded")
	}
	if lost, ok := loser.Lost(); !ok || !lost.Response.Succeeded {
		t.Fatalf("mark answer lost %v, applied %v: the test did not test anything", ok, ok && lost.Response.Succeeded)
	}
	if resp, err := cli.Get(bg, "/fleet/active/", clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("marks left after the operation failed: %v %v", resp.Kvs, err)
	}

	// The group moves to r2, which must find nothing running.
	r2 := &fleetTarget{cli: cli, prefix: "/fleet", replica: "r2", callTime: time.Millisecond, running: map[string]bool{}}
	tok2 := claim(bg, t, cli, "/fleet/claims/r2")
	g := &Group{Name: "stray", Spec: Spec{Size: 1}}
	if err := r2.Update(fencing.WithToken(bg, tok2), nil, 0, g); err != nil {
		t.Fatalf("the next owner's operation: %v", err)
	}
	if resp, err := cli.Get(bg, "/fleet/overlap/", clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("overlaps recorded: %v %v", resp.Kvs, err)
	}
}

// claim makes key a claim under a lease of its own and returns its token.
func claim(ctx context.Context, t *testing.T, cli *clientv3.Client, key string) fencing.Token {
	t.Helper()
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	put, err := cli.Put(ctx, key, "", clientv3.WithLease(lease.ID))
	if err != nil {
		t.Fatal(err)
	}
	return fencing.Token{Key: key, Revision: put.Header.Revision, Lease: lease.ID}
}
