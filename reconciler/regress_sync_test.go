package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// The whole-set findings (2, 3, 4) of the engine-correctness review; the
// others are in regress_test.go.

// funcSync is a whole-set target that runs a function per Sync, told how
// many Syncs came before.
type funcSync struct {
	mu   sync.Mutex
	n    int
	sync func(n int) error
}

func (s *funcSync) Sync(context.Context, statedb.ReadTxn, iter.Seq2[*testObject, statedb.Revision], iter.Seq[reconciler.Change[*testObject]]) error {
	s.mu.Lock()
	n := s.n
	s.n++
	s.mu.Unlock()
	return s.sync(n)
}

// Finding 2: a whole-set reconciler's retry Sync that succeeds while a
// per-object reconciler writes its Done on the same StatusSet object must
// still mark the object Done.
func TestRegressStatusSetSyncRetryLands(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)
	retrying, release, aGo := make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	bOps := &funcSync{sync: func(n int) error {
		switch n {
		case 0:
			return nil // the first Sync, of the empty table
		case 1:
			return errors.New("first Sync with the object fails")
		case 2:
			signal(retrying)
			<-release
		}
		return nil
	}}
	bCfg := statusSetConfig(f, "b", nil, reconciler.Config[*testObject]{
		RetryBackoffMin: time.Millisecond, RetryBackoffMax: time.Millisecond,
		SyncDebounce: reconciler.Trailing(time.Millisecond, time.Millisecond)})
	bCfg.Operations, bCfg.SyncOperations = nil, bOps
	b := mustNew(t, f, bCfg)
	aOps := newScriptedOps(func(context.Context, string, int, *testObject) error {
		<-aGo
		return nil
	})
	a := mustNew(t, f, statusSetConfig(f, "a", aOps, reconciler.Config[*testObject]{}))
	f.markInit()
	f.waitFor(ctx, t, "the first Sync, of the empty table", func() bool {
		bOps.mu.Lock()
		defer bOps.mu.Unlock()
		return bOps.n > 0
	})
	f.insert(t, &testObject{ID: "x", Value: "1", Statuses: reconciler.NewStatusSet()})
	select { // b's retry Sync runs: now a commits its Done
	case <-retrying:
	case <-ctx.Done():
		t.Fatal("no retry Sync")
	}
	close(aGo)
	if err := a.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := b.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	x := f.get("x")
	if got := x.Statuses.Get("b").Kind; got != reconciler.StatusKindDone {
		t.Errorf("b is %s after its retry Sync succeeded, want Done (%s)", got, x.Statuses)
	}
	if got := x.Statuses.Get("a").Kind; got != reconciler.StatusKindDone {
		t.Errorf("a is %s, want Done", got)
	}
}

// syncReconciler is a whole-set reconciler of the fixture's table.
func syncReconciler(t *testing.T, f *fixture, ops *funcSync, cfg reconciler.Config[*testObject]) reconciler.Reconciler[*testObject] {
	cfg = testConfig(f, nil, cfg)
	cfg.Operations, cfg.SyncOperations = nil, ops
	cfg.RetryBackoffMin, cfg.RetryBackoffMax = time.Millisecond, time.Millisecond
	cfg.SyncDebounce = reconciler.Trailing(time.Millisecond, time.Millisecond)
	return mustNew(t, f, cfg)
}

// Finding 3: a Sync given up on by its own failure count still retries
// the objects whose own count says to try again.
func TestRegressSyncMaxRetriesKeepsYoungObjects(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)
	yIn := make(chan struct{})
	ops := &funcSync{}
	ops.sync = func(n int) error {
		switch n {
		case 0:
			return nil // the empty table
		case 1:
			<-yIn // y arrives while the first failing Sync runs
			return errors.New("fails")
		case 2:
			return errors.New("fails again") // x's second failure: given up; y's first
		}
		return nil
	}
	r := syncReconciler(t, f, ops, reconciler.Config[*testObject]{MaxRetries: 2})
	f.markInit()
	f.waitFor(ctx, t, "the first Sync", func() bool { ops.mu.Lock(); defer ops.mu.Unlock(); return ops.n > 0 })
	f.insert(t, &testObject{ID: "x", Status: reconciler.StatusPending()})
	f.waitFor(ctx, t, "the second Sync", func() bool { ops.mu.Lock(); defer ops.mu.Unlock(); return ops.n > 1 })
	rev := f.insert(t, &testObject{ID: "y", Status: reconciler.StatusPending()})
	close(yIn)
	if err := r.WaitUntilSettled(ctx, rev); err != nil {
		t.Fatalf("y stranded: %s", err)
	}
	if got := f.get("y").Status.Kind; got != reconciler.StatusKindDone {
		t.Errorf("y is %s, want Done: its own count allowed a retry", got)
	}
}

// Finding 4: a Sync that defers (RetryAfter(d, nil)) keeps the waits from
// counting its changes as settled, whatever else was read meanwhile.
func TestRegressSyncDeferralHoldsWaits(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)
	yIn := make(chan struct{})
	ops := &funcSync{}
	ops.sync = func(n int) error {
		switch n {
		case 0:
			return nil
		case 1:
			<-yIn
		}
		return reconciler.RetryAfter(time.Hour, nil) // not ready: every later Sync too
	}
	r := syncReconciler(t, f, ops, reconciler.Config[*testObject]{})
	f.markInit()
	f.waitFor(ctx, t, "the first Sync", func() bool { ops.mu.Lock(); defer ops.mu.Unlock(); return ops.n > 0 })
	xRev := f.insert(t, &testObject{ID: "x", Status: reconciler.StatusPending()})
	f.waitFor(ctx, t, "the deferred Sync", func() bool { ops.mu.Lock(); defer ops.mu.Unlock(); return ops.n > 1 })
	for i := range 20 { // several keys, so that map order cannot hide the bug
		f.insert(t, &testObject{ID: fmt.Sprintf("y%02d", i), Status: reconciler.StatusPending()})
	}
	close(yIn)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := r.WaitUntilSettled(short, xRev); err == nil {
		t.Fatalf("WaitUntilSettled(x) returned nil while x is %s", f.get("x").Status.Kind)
	}
}
