package shard

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/converge-go/converge/etcd/fencing"
	"github.com/converge-go/converge/etcd/internal/etcdcluster"
	"github.com/converge-go/converge/reconciler"
)

// Item 2 of issue 32, the shard side: a Prune (Acquire with a nil key) is
// owned, fenced and cancelled. A replica that holds no slot prunes
// nothing; a Prune's removals are fenced per key by the token of the
// slot's claim held when the Prune was acquired; any change of the owned
// slots cancels the Prune, and a slot gained meanwhile is not in its
// scope.
func TestPruneIsOwnedFencedAndCancelled(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	cli := c.Client(t)
	idle, err := New(Config{Client: cli, Prefix: "/test/shards", Name: "idle", Slots: testSlots}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var own reconciler.Ownership = idle
	if _, _, ok := own.Acquire(context.Background(), nil); ok {
		t.Fatal("a replica that holds no slot acquired a Prune")
	}

	a := startMember(t, cli, "a", nil)
	waitUntil(t, []*member{a}, balanced([]*member{a}))
	own = a
	pruneCtx, release, ok := own.Acquire(context.Background(), nil)
	if !ok {
		t.Fatal("the owner of every slot cannot acquire a Prune")
	}
	defer release()
	if _, has := fencing.FromContext(pruneCtx); has {
		t.Fatal("a sharded Prune's context carries a single token: removals must be fenced per key")
	}
	moving, staying := -1, -1
	for s := range testSlots {
		if Assign(s, []string{"a", "b"}) == "b" {
			moving = s
		} else {
			staying = s
		}
	}
	opCtx, opRelease, ok := a.Acquire(pruneCtx, keyIn(staying))
	if !ok {
		t.Fatal("a removal in a held slot was refused")
	}
	if tok, _ := fencing.FromContext(opCtx); tok != mustToken(t, a.Manager, staying) {
		t.Fatalf("removal fenced by %v, want the slot's token %v", tok, mustToken(t, a.Manager, staying))
	}
	opRelease()

	b := startMember(t, cli, "b", nil)
	select {
	case <-pruneCtx.Done():
	case <-time.After(within):
		t.Fatal("the Prune was not cancelled when a's slots changed")
	}
	if cause := context.Cause(pruneCtx); !errors.Is(cause, ErrOwnershipChanged) {
		t.Fatalf("Prune cancelled with %v, want ErrOwnershipChanged", cause)
	}
	both := []*member{a, b}
	waitUntil(t, both, balanced(both))
	if _, _, ok := a.Acquire(pruneCtx, keyIn(moving)); ok {
		t.Fatal("a removal in a slot handed over was allowed")
	}

	// A slot gained after the Prune was acquired is not in its scope.
	pruneCtx2, release2, ok := a.Acquire(context.Background(), nil)
	if !ok {
		t.Fatal("a cannot acquire a Prune of its slots")
	}
	defer release2()
	b.stop()
	waitUntil(t, []*member{a}, func() string {
		if !a.Owns(keyIn(moving)) {
			return "a has not taken b's slots"
		}
		return ""
	})
	if _, _, ok := a.Acquire(pruneCtx2, keyIn(moving)); ok {
		t.Fatal("a removal in a slot gained after the Prune started was allowed")
	}
	select {
	case <-pruneCtx2.Done():
	case <-time.After(within):
		t.Fatal("the Prune was not cancelled when a gained slots")
	}
	if !errors.Is(context.Cause(pruneCtx2), ErrOwnershipChanged) {
		t.Fatalf("Prune across a gain: %v, want cancelled with ErrOwnershipChanged", context.Cause(pruneCtx2))
	}
}
