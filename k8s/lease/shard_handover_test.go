package lease_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/converge-go/converge/internal/slots"
	"github.com/converge-go/converge/k8s/lease"
)

// keyOf returns a key whose slot the assignment over ids gives to id.
func keyOf(t *testing.T, id string, ids []string) []byte {
	t.Helper()
	for i := range 10000 {
		k := fmt.Appendf(nil, "key-%d", i)
		if slots.Assign(slots.Of(k, testSlots), ids) == id {
			return k
		}
	}
	t.Fatalf("no key for %s", id)
	return nil
}

// A slot handed over to a replica that joins waits for the operation in
// flight on it: the new owner does not own the slot while the old one's
// operation runs (its context not cancelled), and owns it once it is
// released.
func TestShardHandoverDrainsOperations(t *testing.T) {
	group := newLeaseName(t)
	long := func(c *lease.ShardConfig) { c.DrainTimeout = waitLimit }
	a := startMember(t, srv.Config(), group, "a", long)
	waitOwners(t, []*member{a}, assigned([]string{"a"}))
	key := keyOf(t, "b", []string{"a", "b"})
	slot := slots.Of(key, testSlots)
	opCtx, release, ok := a.s.Acquire(context.Background(), key)
	if !ok {
		t.Fatal("a does not own a key of its slot")
	}

	b := startMember(t, srv.Config(), group, "b", long)
	// Every other slot settles; the one with an operation in flight does not.
	waitOwners(t, []*member{a, b}, func(owned map[string][]int) bool {
		moved := assigned([]string{"a", "b"})
		for _, s := range owned["a"] {
			if s == slot {
				return false // a has not stopped starting operations on it yet
			}
		}
		owned["b"] = append(owned["b"], slot)
		return moved(owned)
	})
	if slices.Contains(b.s.Owned(), slot) {
		t.Fatalf("b owns slot %d while a's operation on it runs", slot)
	}
	if _, _, ok := a.s.Acquire(context.Background(), key); ok {
		t.Fatal("a starts an operation on a slot it is handing over")
	}
	if err := opCtx.Err(); err != nil {
		t.Fatalf("the operation in flight was cancelled (%v) instead of drained", context.Cause(opCtx))
	}
	release()
	waitOwners(t, []*member{a, b}, assigned([]string{"a", "b"}))
	checkNoOverlap(t, []*member{a, b})
}

// Prune runs only under the claims of the slots held: Acquire(ctx, nil)
// is refused while no slot is held; a Prune's context lets the target
// fence each removal with Acquire(pruneCtx, key), which succeeds only for
// a slot held under the claim remembered; and it is cancelled, with
// ErrOwnershipChanged, when the slots held change.
func TestShardPruneIsOwnedFencedCancelled(t *testing.T) {
	group := newLeaseName(t)
	a := startMember(t, srv.Config(), group, "a")
	waitOwners(t, []*member{a}, assigned([]string{"a"}))
	if a.s.Owns(nil) {
		t.Fatal("a sharder owns the whole set")
	}
	pruneCtx, release, ok := a.s.Acquire(context.Background(), nil)
	if !ok {
		t.Fatal("no Prune while holding every slot")
	}
	defer release()
	bKey := keyOf(t, "b", []string{"a", "b"})
	if _, rel, ok := a.s.Acquire(pruneCtx, bKey); !ok {
		t.Fatal("a removal refused in a slot held")
	} else {
		rel()
	}

	b := startMember(t, srv.Config(), group, "b")
	<-pruneCtx.Done()
	if cause := context.Cause(pruneCtx); !errors.Is(cause, lease.ErrOwnershipChanged) {
		t.Fatalf("the Prune ended with %v", cause)
	}
	waitOwners(t, []*member{a, b}, assigned([]string{"a", "b"}))
	pruneCtx2, release2, ok := a.s.Acquire(context.Background(), nil)
	if !ok {
		t.Fatal("no Prune while holding slots")
	}
	defer release2()
	if _, _, ok := a.s.Acquire(pruneCtx2, bKey); ok {
		t.Fatal("a removal acquired in a slot handed over")
	}
	aKey := keyOf(t, "a", []string{"a", "b"})
	opCtx, rel, ok := a.s.Acquire(pruneCtx2, aKey)
	if !ok {
		t.Fatal("a removal refused in a slot held")
	}
	tok, _ := lease.TokenFrom(opCtx)
	if want, _ := a.s.Token(slots.Of(aKey, testSlots)); tok != want {
		t.Fatalf("removal under token %v, want the slot's %v", tok, want)
	}
	rel()

	a.halt()
	b.halt()
	if _, _, ok := a.s.Acquire(context.Background(), nil); ok {
		t.Fatal("a stopped sharder acquires a Prune")
	}
	checkNoOverlap(t, []*member{a, b})
}

// A clean stop stops starting operations at once, lets the one in flight
// end (its context not cancelled), and only then returns, having
// released the slots.
func TestShardStopDrainsOperations(t *testing.T) {
	group := newLeaseName(t)
	long := func(c *lease.ShardConfig) { c.DrainTimeout = waitLimit }
	a := startMember(t, srv.Config(), group, "a", long)
	waitOwners(t, []*member{a}, assigned([]string{"a"}))
	key := keyOf(t, "a", []string{"a"})
	opCtx, release, ok := a.s.Acquire(context.Background(), key)
	if !ok {
		t.Fatal("a does not own a key of its slot")
	}
	a.stop()
	waitOwners(t, []*member{a}, func(owned map[string][]int) bool { return len(owned["a"]) == 0 })
	if _, _, ok := a.s.Acquire(context.Background(), key); ok {
		t.Fatal("a stopping sharder starts an operation")
	}
	select {
	case <-a.done:
		t.Fatal("Run returned with an operation in flight")
	default:
	}
	if err := opCtx.Err(); err != nil {
		t.Fatalf("the operation in flight was cancelled (%v) instead of drained", context.Cause(opCtx))
	}
	release()
	<-a.done
	b := startMember(t, srv.Config(), group, "b")
	waitOwners(t, []*member{b}, assigned([]string{"b"}))
	checkNoOverlap(t, []*member{a, b})
}
