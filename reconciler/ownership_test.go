package reconciler_test

import (
	"context"
	"iter"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// fakeOwnership owns the keys its predicate accepts; Own changes the
// predicate, cancels the operations of keys no longer owned, and closes
// the Changed channel.
type fakeOwnership struct {
	mu       sync.Mutex
	owns     func(key string) bool
	changed  chan struct{}
	cancels  map[string][]context.CancelFunc
	released int
}

// claimKey is the context key under which fakeOwnership's claims carry
// the key they were acquired for ("" for the whole set): an operation can
// tell that it runs under a claim, and whose.
type claimKey struct{}

func newFakeOwnership(owns func(string) bool) *fakeOwnership {
	return &fakeOwnership{owns: owns, changed: make(chan struct{}), cancels: map[string][]context.CancelFunc{}}
}

func (o *fakeOwnership) Owns(key []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.owns(string(key)) // nil, the whole set, is ""
}

func (o *fakeOwnership) Acquire(ctx context.Context, key []byte) (context.Context, func(), bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.owns(string(key)) {
		return nil, nil, false
	}
	ctx, cancel := context.WithCancel(context.WithValue(ctx, claimKey{}, string(key)))
	o.cancels[string(key)] = append(o.cancels[string(key)], cancel)
	return ctx, func() {
		o.mu.Lock()
		o.released++
		o.mu.Unlock()
		cancel()
	}, true
}

func (o *fakeOwnership) Changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}

// Own changes the owned set and says so on Changed.
func (o *fakeOwnership) Own(owns func(string) bool) {
	o.ownQuietly(owns)
	o.notify()
}

// ownQuietly changes the owned set without saying so yet: the reconciler
// sees it only in what Owns answers.
func (o *fakeOwnership) ownQuietly(owns func(string) bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.owns = owns
	for key, cancels := range o.cancels {
		if !owns(key) {
			for _, c := range cancels {
				c()
			}
			delete(o.cancels, key)
		}
	}
}

// notify closes the channel Changed returned.
func (o *fakeOwnership) notify() {
	o.mu.Lock()
	defer o.mu.Unlock()
	close(o.changed)
	o.changed = make(chan struct{})
}

// TestOwnershipFiltersOutstandingWork: keys this replica does not own are
// no outstanding work (no operation, no status, no count but Unowned, no
// wait); keys it comes to own are reconciled at once; an operation whose
// key it stops owning is cancelled and writes nothing.
func TestOwnershipFiltersOutstandingWork(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)
	f.markInit()
	own := newFakeOwnership(func(key string) bool { return strings.HasPrefix(key, "a") })
	blockB := make(chan struct{})
	ops := newScriptedOps(func(ctx context.Context, key string, n int, _ *testObject) error {
		if key == "b-slow" && n == 0 {
			select {
			case <-blockB:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	r := mustNew(t, f, testConfig(f, ops, reconciler.Config[*testObject]{Concurrency: 4, Ownership: own}))
	var objs []*testObject
	for _, k := range []string{"a1", "a2", "b1", "b2"} {
		objs = append(objs, &testObject{ID: k, Status: reconciler.StatusPending()})
	}
	rev := f.insert(t, objs...)
	if err := r.WaitUntilSettled(ctx, rev); err != nil {
		t.Fatalf("the wait counts keys another replica owns: %s", err)
	}
	for _, k := range []string{"b1", "b2"} {
		if n := ops.count(k); n != 0 {
			t.Errorf("%s reconciled %d times by a replica that does not own it", k, n)
		}
		if got := f.get(k).Status.Kind; got != reconciler.StatusKindPending {
			t.Errorf("%s is %s: a status was written for a key another replica owns", k, got)
		}
	}
	if s := r.Status().Objects; s.Done != 2 || s.Unowned != 2 || s.Pending != 0 {
		t.Errorf("Status().Objects = %+v, want Done 2, Unowned 2", s)
	}

	// Coming to own everything: the keys gained are reconciled at once.
	own.Own(func(string) bool { return true })
	f.waitFor(ctx, t, "b1 and b2 Done", func() bool {
		return f.get("b1").Status.Kind == reconciler.StatusKindDone && f.get("b2").Status.Kind == reconciler.StatusKindDone
	})
	f.waitFor(ctx, t, "Status() counting 4 Done, none unowned", func() bool {
		s := r.Status().Objects
		return s.Done == 4 && s.Unowned == 0 && s.Pending == 0
	})

	// Losing a key while its operation runs: cancelled, nothing written.
	f.insert(t, &testObject{ID: "b-slow", Status: reconciler.StatusPending()})
	f.waitFor(ctx, t, "b-slow in flight", func() bool { return ops.count("b-slow") == 1 })
	own.Own(func(key string) bool { return strings.HasPrefix(key, "a") })
	f.waitFor(ctx, t, "b-slow given back", func() bool { return r.Status().Objects.Unowned == 3 })
	close(blockB)
	if got := f.get("b-slow").Status.Kind; got != reconciler.StatusKindPending {
		t.Errorf("b-slow is %s after its owner changed mid-operation, want Pending", got)
	}
	rev = f.table.Revision(f.db.ReadTxn())
	if err := r.WaitUntilSettled(ctx, rev); err != nil {
		t.Fatal(err)
	}
	// b-slow's claim is released when its cancelled operation returns, on
	// the worker: it is no outstanding work, so the wait above does not
	// wait for it.
	releasedClaims := func() int {
		own.mu.Lock()
		defer own.mu.Unlock()
		return own.released
	}
	f.waitFor(ctx, t, "b-slow's claim released", func() bool { return releasedClaims() >= 5 })
	if released := releasedClaims(); released != 5 {
		t.Errorf("%d claims released, want one per operation (5)", released)
	}

}

// startBGivenAway starts a reconciler that owns every key, has a and b
// Done, and then gives b away (Own: only a), and waits until b counts as
// unowned.
func startBGivenAway(t *testing.T) (*fixture, context.Context, *fakeOwnership, *scriptedOps, reconciler.Reconciler[*testObject]) {
	t.Helper()
	f, ctx := startFixture(t, 10*time.Second)
	f.markInit()
	own := newFakeOwnership(func(string) bool { return true })
	ops := newScriptedOps(func(context.Context, string, int, *testObject) error { return nil })
	r := mustNew(t, f, testConfig(f, ops, reconciler.Config[*testObject]{Concurrency: 4, Ownership: own}))
	rev := f.insert(t, &testObject{ID: "a", Status: reconciler.StatusPending()}, &testObject{ID: "b", Status: reconciler.StatusPending()})
	if err := r.WaitUntilSettled(ctx, rev); err != nil {
		t.Fatal(err)
	}
	own.Own(func(key string) bool { return key == "a" })
	f.waitFor(ctx, t, "b given away", func() bool { return r.Status().Objects.Unowned == 1 })
	return f, ctx, own, ops, r
}

// TestOwnershipRegainedDoneIsAppliedAgain: a key Done here under an
// earlier ownership is applied again when it is owned again (its owner
// meanwhile may have changed the target); a key owned throughout is not.
func TestOwnershipRegainedDoneIsAppliedAgain(t *testing.T) {
	f, ctx, own, ops, r := startBGivenAway(t)
	own.Own(func(string) bool { return true })
	f.waitFor(ctx, t, "b applied again", func() bool { return ops.count("b") == 2 })
	f.waitFor(ctx, t, "Status() counting 2 Done", func() bool {
		s := r.Status().Objects
		return s.Done == 2 && s.Unowned == 0 && s.Pending == 0 && s.Refreshing == 0
	})
	if n := ops.count("a"); n != 1 {
		t.Errorf("a, owned throughout, reconciled %d times, want 1", n)
	}
}

// TestOwnershipRegainedBeforeChangedIsApplied: a change of an unowned key
// read after the key is owned again but before Changed says so regains
// the key, as the walk at Changed would have: it was unowned there, and a
// Done read from it must not end its re-application.
func TestOwnershipRegainedBeforeChangedIsApplied(t *testing.T) {
	f, ctx, own, ops, r := startBGivenAway(t)

	// Owned again; b changes (data only, its Done kept) before Changed.
	own.ownQuietly(func(string) bool { return true })
	b := *f.get("b")
	b.Value = "new"
	f.insert(t, &b)
	f.waitFor(ctx, t, "b's change read", func() bool { return r.Status().Objects.Unowned == 0 })
	own.notify()
	f.waitFor(ctx, t, "b applied again", func() bool { return ops.count("b") == 2 })
	if err := r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	if got := f.get("b").Status.Kind; got != reconciler.StatusKindDone {
		t.Errorf("b is %s, want Done", got)
	}
}

// changeLog is a whole-set target that records the keys each Sync's
// changes listed.
type changeLog struct {
	mu    sync.Mutex
	syncs [][]string
}

func (c *changeLog) Sync(_ context.Context, _ statedb.ReadTxn, _ iter.Seq2[*testObject, statedb.Revision], changes iter.Seq[reconciler.Change[*testObject]]) error {
	var keys []string
	for ch := range changes {
		keys = append(keys, ch.Object.ID)
	}
	sort.Strings(keys)
	c.mu.Lock()
	c.syncs = append(c.syncs, keys)
	c.mu.Unlock()
	return nil
}

func (c *changeLog) last() (int, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.syncs) == 0 {
		return 0, nil
	}
	return len(c.syncs), c.syncs[len(c.syncs)-1]
}

// TestOwnershipNewTermSyncsEverything: a whole-set reconciler that leads
// again after another replica led begins its term with a Sync that lists
// every object, as a run's first Sync does: the other leader may have
// changed the target meanwhile.
func TestOwnershipNewTermSyncsEverything(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)
	f.markInit()
	own := newFakeOwnership(func(string) bool { return true })
	target := &changeLog{}
	cfg := testConfig(f, nil, reconciler.Config[*testObject]{Ownership: own,
		SyncDebounce: reconciler.Trailing(time.Millisecond, time.Millisecond)})
	cfg.Operations, cfg.SyncOperations = nil, target
	r := mustNew(t, f, cfg)
	rev := f.insert(t, &testObject{ID: "a", Status: reconciler.StatusPending()}, &testObject{ID: "b", Status: reconciler.StatusPending()})
	if err := r.WaitUntilSettled(ctx, rev); err != nil {
		t.Fatal(err)
	}
	rev = f.insert(t, &testObject{ID: "c", Status: reconciler.StatusPending()})
	if err := r.WaitUntilSettled(ctx, rev); err != nil {
		t.Fatal(err)
	}
	if _, keys := target.last(); !slices.Equal(keys, []string{"c"}) {
		t.Fatalf("a Sync within the term listed %v, want [c]", keys)
	}

	own.Own(func(string) bool { return false })
	f.waitFor(ctx, t, "standby", func() bool { return r.Status().Objects.Unowned == 3 })
	n, _ := target.last()
	own.Own(func(string) bool { return true })
	f.waitFor(ctx, t, "the new term's first Sync", func() bool { m, _ := target.last(); return m > n })
	if _, keys := target.last(); !slices.Equal(keys, []string{"a", "b", "c"}) {
		t.Errorf("the new term's first Sync listed %v, want every object [a b c]", keys)
	}
}
