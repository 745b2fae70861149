package leader

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/fencing"
	"github.com/converge-go/converge/etcd/internal/etcdcluster"
	"github.com/converge-go/converge/reconciler"
)

// Item 2 of issue 32, the leader side, through the Ownership interface
// as the engine calls it before each Prune: a standby's Acquire(nil) says
// no (it prunes nothing); the leader's carries the term's token and is
// cancelled when the term ends, and a removal fenced by it is refused
// from then on.
func TestPruneOnlyWhileLeadingUnderTheTermsToken(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	cli := c.Client(t)
	a, _ := startElector(t, cli, "a", 10*time.Second)
	waitLeading(t, a, true)
	b, _ := startElector(t, cli, "b", 10*time.Second)
	var standby, leader reconciler.Ownership = b, a
	if _, _, ok := standby.Acquire(context.Background(), nil); ok {
		t.Fatal("a standby acquired a Prune")
	}
	if _, err := cli.Put(context.Background(), "/target/stray", "x"); err != nil {
		t.Fatal(err)
	}
	pruneCtx, release, ok := leader.Acquire(context.Background(), nil)
	if !ok {
		t.Fatal("the leader cannot acquire a Prune")
	}
	defer release()
	term, _ := a.Token()
	if tok, has := fencing.FromContext(pruneCtx); !has || tok != term {
		t.Fatalf("Prune's token %v (%v), want the term's %v", tok, has, term)
	}
	// The term ends (its lease revoked, as at expiry): the Prune is
	// cancelled, and what it still removes is refused.
	if _, err := cli.Revoke(context.Background(), term.Lease); err != nil {
		t.Fatal(err)
	}
	select {
	case <-pruneCtx.Done():
	case <-time.After(within):
		t.Fatal("the Prune was not cancelled when the term ended")
	}
	late := fencing.WithToken(context.Background(), term)
	if err := fencing.Do(late, cli, clientv3.OpDelete("/target/stray")); !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("removal under the ended term: %v, want ErrStale", err)
	}
}
