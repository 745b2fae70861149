package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/converge-go/converge/reconciler"
)

// The findings of issue 32 on the engine's Ownership seam, one test each.

// Finding 1: k's Update succeeds and its Done write is out on the
// committer; k is given away and regained, and the regained request's
// Update fails. The Done write then lands: the failure must still be
// recorded (the request owes it), not taken as superseded and forgotten.
func TestOwnershipFailureAfterRegainIsKept(t *testing.T) {
	prev := reconciler.SetForcePipelined(true)
	defer reconciler.SetForcePipelined(prev)
	f, ctx := startFixture(t, 10*time.Second)
	f.markInit()
	own := newFakeOwnership(ownsAll)
	release := make(chan struct{})
	ops := newOwnOps(func(_ context.Context, _ string, n int) error {
		if n == 0 {
			<-release
			return nil
		}
		return errors.New("re-apply failed")
	})
	r := mustNew(t, f, ownConfig(f, ops, own, reconciler.Config[*testObject]{}))
	f.insert(t, &testObject{ID: "k", Status: reconciler.StatusPending()})
	f.waitFor(ctx, t, "k's first Update", func() bool { return ops.count("k") == 1 })

	// Holding the table's write lock keeps the Done write on the committer.
	wtxn := f.db.WriteTxn(f.table)
	close(release)
	f.waitFor(ctx, t, "k's Done write out", func() bool { s := r.Status(); return s.InFlight == 0 && s.Waiting == 1 })
	own.Own(ownsNone)
	f.waitFor(ctx, t, "k given away", func() bool { return r.Status().Objects.Unowned == 1 })
	own.Own(ownsAll)
	f.waitFor(ctx, t, "k's regained Update", func() bool { return ops.count("k") == 2 })
	wtxn.Abort()

	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	f.waitFor(short, t, "k in Error: its last Update failed", func() bool {
		return f.get("k").Status.Kind == reconciler.StatusKindError
	})
	f.waitFor(short, t, "Status() counting k in Error", func() bool { return r.Status().Objects.Error == 1 })
}

// A status write out on the committer when its key is given away does
// not land: the write asks Owns inside its transaction.
func TestOwnershipNoWriteAfterLoss(t *testing.T) {
	prev := reconciler.SetForcePipelined(true)
	defer reconciler.SetForcePipelined(prev)
	f, ctx := startFixture(t, 10*time.Second)
	f.markInit()
	own := newFakeOwnership(ownsAll)
	release := make(chan struct{})
	ops := newOwnOps(func(context.Context, string, int) error { <-release; return nil })
	r := mustNew(t, f, ownConfig(f, ops, own, reconciler.Config[*testObject]{}))
	f.insert(t, &testObject{ID: "k", Status: reconciler.StatusPending()})
	f.waitFor(ctx, t, "k's Update", func() bool { return ops.count("k") == 1 })

	wtxn := f.db.WriteTxn(f.table) // keeps the Done write on the committer
	close(release)
	f.waitFor(ctx, t, "k's Done write out", func() bool { s := r.Status(); return s.InFlight == 0 && s.Waiting == 1 })
	own.ownQuietly(ownsNone) // Changed comes later: only the write's own look can tell
	wtxn.Abort()
	if err := r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	if got := f.get("k").Status.Kind; got != reconciler.StatusKindPending {
		t.Errorf("k is %s: a status was written into it after it was given away", got)
	}
	own.notify()
	f.waitFor(ctx, t, "k given away", func() bool { return r.Status().Objects.Unowned == 1 })
}

// The case the model test with ownership flips saw once in 24 seeds: an
// older Error landing over a newer success. k's Update fails for good and
// its Error write is out on the committer; k is given away and regained,
// and the regained request's Update succeeds. The Error then lands: the
// success must still be written over it, and Status() agree with the
// table.
func TestOwnershipLateErrorOverSuccess(t *testing.T) {
	prev := reconciler.SetForcePipelined(true)
	defer reconciler.SetForcePipelined(prev)
	f, ctx := startFixture(t, 10*time.Second)
	f.markInit()
	own := newFakeOwnership(ownsAll)
	release := make(chan struct{})
	ops := newOwnOps(func(_ context.Context, _ string, n int) error {
		if n == 0 {
			<-release
			return reconciler.Permanent(errors.New("first attempt failed"))
		}
		return nil
	})
	r := mustNew(t, f, ownConfig(f, ops, own, reconciler.Config[*testObject]{}))
	f.insert(t, &testObject{ID: "k", Status: reconciler.StatusPending()})
	f.waitFor(ctx, t, "k's first Update", func() bool { return ops.count("k") == 1 })

	wtxn := f.db.WriteTxn(f.table) // keeps the Error write on the committer
	close(release)
	f.waitFor(ctx, t, "k's Error write out", func() bool { s := r.Status(); return s.InFlight == 0 && s.Waiting == 1 })
	own.Own(ownsNone)
	f.waitFor(ctx, t, "k given away", func() bool { return r.Status().Objects.Unowned == 1 })
	own.Own(ownsAll)
	f.waitFor(ctx, t, "k's regained Update", func() bool { return ops.count("k") == 2 })
	wtxn.Abort()

	if err := r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	f.waitFor(short, t, "k Done: its last Update succeeded", func() bool {
		return f.get("k").Status.Kind == reconciler.StatusKindDone
	})
	if s := r.Status().Objects; s.Done != 1 || s.Error != 0 {
		t.Errorf("Status().Objects = %+v, want Done 1", s)
	}
}

// Finding 2: a key changed while unowned, read past, then owned: a wait
// for the revision of its change waits for its Update.
func TestOwnershipRegainedKeyHoldsTheWait(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)
	f.markInit()
	own := newFakeOwnership(ownsNone)
	release := make(chan struct{})
	ops := newOwnOps(func(context.Context, string, int) error { <-release; return nil })
	r := mustNew(t, f, ownConfig(f, ops, own, reconciler.Config[*testObject]{}))
	rev := f.insert(t, &testObject{ID: "k", Status: reconciler.StatusPending()})
	if err := r.WaitUntilSettled(ctx, rev); err != nil {
		t.Fatalf("unowned keys hold the wait: %s", err)
	}
	own.Own(ownsAll)
	// At once, before the loop may have looked at Changed: the wait
	// covers the keys gained all the same.
	notSettled := func(when string) {
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if err := r.WaitUntilSettled(short, rev); err == nil {
			t.Errorf("WaitUntilSettled(%d) returned %s; Status: %+v", rev, when, r.Status().Objects)
		}
	}
	notSettled("right after k was gained")
	f.waitFor(ctx, t, "k's Update", func() bool { return ops.count("k") == 1 })
	notSettled("while k's Update is in flight")
	close(release)
	if err := r.WaitUntilSettled(ctx, rev); err != nil {
		t.Fatal(err)
	}
}

// Finding 3: an attempt stuck past OperationTimeout, whose retry is due
// and waits for the key, takes no room in the round: with RoundSize 1,
// a key inserted afterwards is still reconciled.
func TestStuckAttemptTakesNoRoundRoom(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)
	f.markInit()
	release := make(chan struct{})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	ops := newOwnOps(func(_ context.Context, key string, n int) error {
		if key == "a" && n == 0 {
			<-release // ignores its context
		}
		return nil
	})
	cfg := testConfig(f, ops, reconciler.Config[*testObject]{RoundSize: 1, OperationTimeout: 30 * time.Millisecond,
		RetryBackoffMin: time.Millisecond, RetryBackoffMax: 2 * time.Millisecond,
		FullReconciliationInterval: reconciler.Off, RefreshInterval: reconciler.Off})
	r := mustNew(t, f, cfg)
	f.insert(t, &testObject{ID: "a", Status: reconciler.StatusPending()})
	f.waitFor(ctx, t, "a's retry waiting for its stuck attempt", func() bool {
		s := r.Status()
		return s.Objects.Error == 1 && s.Retries == 0 && s.Waiting == 1 && s.InFlight == 0 && s.Stuck == 1
	})
	f.insert(t, &testObject{ID: "b", Status: reconciler.StatusPending()})
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	f.waitFor(short, t, "b Done beside a's stuck attempt", func() bool {
		return f.get("b").Status.Kind == reconciler.StatusKindDone
	})
	close(release)
	f.waitFor(ctx, t, "a Done once its attempt returned", func() bool {
		return f.get("a").Status.Kind == reconciler.StatusKindDone
	})
}

// Finding 4: refresh marks only the keys this replica owns; it goes on
// when this replica prunes nothing.
func TestOwnershipRefreshSkipsUnownedKeys(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)
	f.markInit()
	own := newFakeOwnership(func(key string) bool { return key == "a" })
	ops := newOwnOps(func(context.Context, string, int) error { return nil })
	r := mustNew(t, f, ownConfig(f, ops, own, reconciler.Config[*testObject]{RefreshInterval: time.Minute}))
	old := reconciler.Status{Kind: reconciler.StatusKindDone, UpdatedAt: time.Now().Add(-time.Hour)}
	rev := f.insert(t, &testObject{ID: "a", Status: old}, &testObject{ID: "b", Status: old})
	if err := r.WaitUntilSettled(ctx, rev); err != nil {
		t.Fatal(err)
	}
	r.TriggerFullReconciliation()
	// a and b are marked in one write transaction, if at all.
	f.waitFor(ctx, t, "a refreshed", func() bool { return ops.count("a") == 1 })
	if got := f.get("b").Status.Kind; got != reconciler.StatusKindDone {
		t.Errorf("b, another replica's, is %s: refresh wrote its status", got)
	}
	if n := ops.numPrunes(); n != 0 {
		t.Errorf("%d prunes by a replica that does not hold the whole set's claim", n)
	}
}

// Finding 5: keys inserted and deleted while another replica owns them are
// that replica's work: forgotten here, not deleted when owned later.
func TestOwnershipUnownedDeletesAreForgotten(t *testing.T) {
	f, ctx := startFixture(t, 20*time.Second)
	f.markInit()
	own := newFakeOwnership(ownsNone)
	ops := newOwnOps(func(context.Context, string, int) error { return nil })
	r := mustNew(t, f, ownConfig(f, ops, own, reconciler.Config[*testObject]{}))
	const n = 500
	var objs []*testObject
	for i := range n {
		objs = append(objs, &testObject{ID: fmt.Sprintf("gone%04d", i), Status: reconciler.StatusPending()})
	}
	f.insert(t, objs...)
	wtxn := f.db.WriteTxn(f.table)
	for _, o := range objs {
		if _, _, err := f.table.Delete(wtxn, o); err != nil {
			t.Fatal(err)
		}
	}
	wtxn.Commit()
	// A live key too, whose gain shows that the loop looked at Changed.
	rev := f.insert(t, &testObject{ID: "live", Status: reconciler.StatusPending()})
	if err := r.WaitUntilSettled(ctx, rev); err != nil {
		t.Fatal(err)
	}
	own.Own(ownsAll)
	f.waitFor(ctx, t, "the live key gained", func() bool { return r.Status().Objects.Unowned == 0 })
	rev = f.insert(t, &testObject{ID: "w", Status: reconciler.StatusPending()})
	if err := r.WaitUntilSettled(ctx, rev); err != nil {
		t.Fatal(err)
	}
	ops.mu.Lock()
	deletes := ops.deletes
	ops.mu.Unlock()
	if deletes != 0 {
		t.Errorf("%d Deletes of keys deleted while another replica owned them, want 0", deletes)
	}
	if s := r.Status().Objects; s.Unowned != 0 || s.Done != 2 {
		t.Errorf("Status().Objects = %+v, want Done 2", s)
	}
}

// Finding 6: Prune is an operation like the others. A replica that does
// not hold the whole set's claim prunes nothing; one that does prunes
// under that claim, given only the objects of the keys it owns, and the
// claim's end cancels it.
func TestOwnershipPruneIsOwnedFencedCancelled(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)
	f.markInit()
	own := newFakeOwnership(ownsNone)
	ops := newOwnOps(func(context.Context, string, int) error { return nil })
	r := mustNew(t, f, ownConfig(f, ops, own, reconciler.Config[*testObject]{}))
	rev := f.insert(t, &testObject{ID: "a1", Status: reconciler.StatusPending()},
		&testObject{ID: "a2", Status: reconciler.StatusPending()}, &testObject{ID: "b1", Status: reconciler.StatusPending()})
	if err := r.WaitUntilSettled(ctx, rev); err != nil {
		t.Fatal(err)
	}
	fullAfter := func(before time.Time) func() bool {
		return func() bool { return r.Status().LastFull.At.After(before) }
	}
	before := r.Status().LastFull.At
	r.TriggerFullReconciliation()
	f.waitFor(ctx, t, "a full reconciliation", fullAfter(before))
	if n := ops.numPrunes(); n != 0 {
		t.Fatalf("a replica that owns nothing pruned %d times", n)
	}

	// Owning the a keys, and a claim on the whole set ("" is nil's key).
	own.Own(func(key string) bool { return key == "" || strings.HasPrefix(key, "a") })
	if err := r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	before = r.Status().LastFull.At
	r.TriggerFullReconciliation()
	f.waitFor(ctx, t, "a full reconciliation", fullAfter(before))
	ops.mu.Lock()
	keys, claimed := ops.prunes[0], ops.claimed[0]
	ops.mu.Unlock()
	if !slices.Equal(keys, []string{"a1", "a2"}) {
		t.Errorf("Prune was given %v, want the owned [a1 a2]", keys)
	}
	if !claimed {
		t.Error("Prune ran without the whole set's claim")
	}

	// The claim ends while a Prune runs: its context is cancelled.
	cancelled := make(chan error, 1)
	ops.mu.Lock()
	ops.prune = func(ctx context.Context) error {
		<-ctx.Done()
		cancelled <- ctx.Err()
		return ctx.Err()
	}
	ops.mu.Unlock()
	r.TriggerFullReconciliation()
	f.waitFor(ctx, t, "the second Prune", func() bool { return ops.numPrunes() == 2 })
	own.Own(ownsNone)
	select {
	case <-cancelled:
	case <-ctx.Done():
		t.Fatal("the Prune's context was not cancelled when the claim ended")
	}
}
