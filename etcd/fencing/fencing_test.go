package fencing_test

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/converge-go/converge/etcd/fencing"
	"github.com/converge-go/converge/etcd/internal/etcdcluster"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdcluster.LeakOptions()...) }

func TestDoGuardsTheWriteWithTheClaim(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	cli := c.Client(t)
	ctx := context.Background()
	if err := fencing.Do(ctx, cli, clientv3.OpPut("/t/x", "1")); !errors.Is(err, fencing.ErrNoToken) {
		t.Fatalf("Do without a token: %v, want ErrNoToken", err)
	}
	put, err := cli.Put(ctx, "/claim", "me")
	if err != nil {
		t.Fatal(err)
	}
	tok := fencing.Token{Key: "/claim", Revision: put.Header.Revision}
	fctx := fencing.WithToken(ctx, tok)
	if got, ok := fencing.FromContext(fctx); !ok || got != tok {
		t.Fatalf("FromContext = %v, %v", got, ok)
	}
	if err := fencing.Do(fctx, cli, clientv3.OpPut("/t/x", "1")); err != nil {
		t.Fatalf("Do under a live claim: %v", err)
	}
	// A failing extra comparison is not staleness.
	resp, err := fencing.Txn(fctx, cli, []clientv3.Cmp{clientv3.Compare(clientv3.Value("/t/x"), "=", "other")}, clientv3.OpPut("/t/x", "2"))
	if err != nil || resp.Succeeded {
		t.Fatalf("Txn with a failing extra comparison: succeeded %v, err %v; want false, nil", resp.Succeeded, err)
	}
	// The claim is made anew (a new owner): the old token is stale even
	// though the key exists again.
	if _, err := cli.Delete(ctx, "/claim"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/claim", "someone else"); err != nil {
		t.Fatal(err)
	}
	if err := fencing.Do(fctx, cli, clientv3.OpPut("/t/x", "3")); !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("Do under a claim made anew: %v, want ErrStale", err)
	}
	get, err := cli.Get(ctx, "/t/x")
	if err != nil || string(get.Kvs[0].Value) != "1" {
		t.Fatalf("target after the refused writes: %v %v, want 1", get.Kvs, err)
	}
	if _, err := fencing.Guard(ctx); !errors.Is(err, fencing.ErrNoToken) {
		t.Fatalf("Guard without a token: %v", err)
	}
}
