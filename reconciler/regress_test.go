package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// Regression tests for the engine-correctness review (issue 21): each test
// reproduces one finding that the engine before the outstanding-work
// redesign got wrong, with bounded waits.

// scriptedOps runs a function per call, told the key and how many times
// the key was called before.
type scriptedOps struct {
	mu     sync.Mutex
	calls  map[string]int
	seen   []reconciler.StatusKind // the status kind of every object Update got
	update func(ctx context.Context, key string, n int, obj *testObject) error
	prune  func(ctx context.Context) error
}

func newScriptedOps(update func(ctx context.Context, key string, n int, obj *testObject) error) *scriptedOps {
	return &scriptedOps{calls: map[string]int{}, update: update}
}

func (o *scriptedOps) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *testObject) error {
	o.mu.Lock()
	n := o.calls[obj.ID]
	o.calls[obj.ID]++
	o.seen = append(o.seen, obj.Status.Kind)
	o.mu.Unlock()
	return o.update(ctx, obj.ID, n, obj)
}

func (o *scriptedOps) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *testObject) error {
	return nil
}

func (o *scriptedOps) Prune(ctx context.Context, _ statedb.ReadTxn, _ iter.Seq2[*testObject, statedb.Revision]) error {
	if o.prune != nil {
		return o.prune(ctx)
	}
	return nil
}

func (o *scriptedOps) count(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.calls[key]
}

// statuses are the status kinds of the objects Update got, in order.
func (o *scriptedOps) statuses() []reconciler.StatusKind {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.seen)
}

// statusSetConfig is a config for reconciler name over the objects'
// StatusSet.
func statusSetConfig(f *fixture, name string, ops reconciler.Operations[*testObject], cfg reconciler.Config[*testObject]) reconciler.Config[*testObject] {
	cfg = testConfig(f, ops, cfg)
	cfg.Name = name
	cfg.GetObjectStatus = func(o *testObject) reconciler.Status { return o.Statuses.Get(name) }
	cfg.SetObjectStatus = func(o *testObject, s reconciler.Status) *testObject {
		o.Statuses = o.Statuses.Set(name, s)
		return o
	}
	return cfg
}

func mustNew(t *testing.T, f *fixture, cfg reconciler.Config[*testObject]) reconciler.Reconciler[*testObject] {
	t.Helper()
	r, err := reconciler.New(cfg, f.params)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// insert writes objs and returns the table's revision after the write.
func (f *fixture) insert(t *testing.T, objs ...*testObject) statedb.Revision {
	t.Helper()
	wtxn := f.db.WriteTxn(f.table)
	for _, o := range objs {
		if _, _, err := f.table.Insert(wtxn, o); err != nil {
			t.Fatal(err)
		}
	}
	return f.table.Revision(wtxn.Commit())
}

func (f *fixture) get(key string) *testObject {
	obj, _, _ := f.table.Get(f.db.ReadTxn(), idIndex.Query(key))
	return obj
}

// waitFor waits, until ctx ends, for cond to hold; cond is checked each
// time the table changes. It fails the test with what on timeout.
func (f *fixture) waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for {
		_, watch := f.table.AllWatch(f.db.ReadTxn())
		if cond() {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-watch:
		case <-time.After(5 * time.Millisecond): // Status() has no watch channel
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Finding 1: with a StatusSet, a retry of reconciler a whose object
// reconciler b wrote Done meanwhile must still land, whether it succeeds
// or fails again.
func TestRegressStatusSetRetryLands(t *testing.T) {
	for _, secondFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("second-attempt-fails=%v", secondFails), func(t *testing.T) {
			f, ctx := startFixture(t, 10*time.Second)
			f.markInit()
			aRetrying, release, bGo := make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
			aOps := newScriptedOps(func(ctx context.Context, key string, n int, _ *testObject) error {
				switch n {
				case 0:
					return errors.New("first attempt fails")
				case 1:
					signal(aRetrying)
					<-release
					if secondFails {
						return errors.New("second attempt fails")
					}
				}
				return nil
			})
			bOps := newScriptedOps(func(ctx context.Context, _ string, _ int, _ *testObject) error {
				<-bGo
				return nil
			})
			backoff := reconciler.Config[*testObject]{RetryBackoffMin: time.Millisecond, RetryBackoffMax: time.Millisecond}
			a := mustNew(t, f, statusSetConfig(f, "a", aOps, backoff))
			b := mustNew(t, f, statusSetConfig(f, "b", bOps, backoff))
			f.insert(t, &testObject{ID: "x", Value: "1", Statuses: reconciler.NewStatusSet()})

			<-aRetrying // a's retry runs: now b commits its Done
			close(bGo)
			if err := b.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
				t.Fatal(err)
			}
			close(release)
			if err := a.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
				t.Fatal(err)
			}
			x := f.get("x")
			if got := x.Statuses.Get("a").Kind; got != reconciler.StatusKindDone {
				t.Errorf("a is %s after its retry succeeded, want Done (%s)", got, x.Statuses)
			}
			if got := x.Statuses.Get("b").Kind; got != reconciler.StatusKindDone {
				t.Errorf("b is %s, want Done", got)
			}
			if s := a.Status(); s.Objects.Error != 0 || s.Objects.Done != 1 {
				t.Errorf("a's Status().Objects = %+v, want Done 1", s.Objects)
			}
		})
	}
}

// Finding 5: an object in flight for a deferred retry does not hold back
// WaitUntilReconciled for a later change that is done.
func TestRegressDeferredInFlightKeepsProgress(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)
	f.markInit()
	blocked, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	ops := newScriptedOps(func(ctx context.Context, key string, n int, _ *testObject) error {
		if key != "x" {
			return nil
		}
		if n == 0 {
			return reconciler.RetryAfter(5*time.Millisecond, nil)
		}
		signal(blocked)
		<-release
		return nil
	})
	r := mustNew(t, f, testConfig(f, ops, reconciler.Config[*testObject]{Concurrency: 2}))
	f.insert(t, &testObject{ID: "x", Status: reconciler.StatusPending()})
	<-blocked
	rev := f.insert(t, &testObject{ID: "y", Status: reconciler.StatusPending()})
	reconciled, _, err := r.WaitUntilReconciled(ctx, rev)
	if err != nil || reconciled < rev {
		t.Fatalf("WaitUntilReconciled(%d) = %d, %v while x's deferred retry is in flight", rev, reconciled, err)
	}
}

// Finding 6: an operation that is running shows in Status(): the object
// is Pending and in flight, and its wait grows.
func TestRegressRunningOperationIsVisible(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)
	f.markInit()
	release := make(chan struct{})
	ops := newScriptedOps(func(ctx context.Context, _ string, _ int, _ *testObject) error {
		<-release
		return nil
	})
	r := mustNew(t, f, testConfig(f, ops, reconciler.Config[*testObject]{})) // Concurrency 1, no timeout
	f.insert(t, &testObject{ID: "1", Status: reconciler.StatusPending()},
		&testObject{ID: "2", Status: reconciler.StatusPending()}, &testObject{ID: "3", Status: reconciler.StatusPending()})
	f.waitFor(ctx, t, "an operation in flight", func() bool { return r.Status().InFlight > 0 })
	s := r.Status()
	if s.Objects.Pending != 3 || s.Objects.Done != 0 || s.Waiting != 3 {
		t.Errorf("Status() while operations run: objects %+v, waiting %d; want Pending 3, waiting 3", s.Objects, s.Waiting)
	}
	time.Sleep(20 * time.Millisecond) // the wait must grow while nothing happens
	if later := r.Status().OldestWaiting; later < s.OldestWaiting+20*time.Millisecond {
		t.Errorf("OldestWaiting went from %s to %s in 20ms: frozen", s.OldestWaiting, later)
	}
	close(release)
	if err := r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
}

// Finding 7: an operation that ignores its context fails with ErrTimeout
// at its deadline, in the table and in Status(), though it never returns.
func TestRegressHangFailsAtDeadline(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)
	f.markInit()
	release := make(chan struct{})
	defer close(release)
	ops := newScriptedOps(func(ctx context.Context, _ string, _ int, _ *testObject) error {
		<-release // ignores ctx
		return nil
	})
	r := mustNew(t, f, testConfig(f, ops, reconciler.Config[*testObject]{Concurrency: 2, OperationTimeout: 30 * time.Millisecond}))
	f.insert(t, &testObject{ID: "x", Status: reconciler.StatusPending()})
	f.waitFor(ctx, t, "x in Error", func() bool { return f.get("x").Status.Kind == reconciler.StatusKindError })
	if msg := f.get("x").Status.Error; !strings.Contains(msg, "timed out") {
		t.Errorf("x's error is %q, want a timeout", msg)
	}
	f.waitFor(ctx, t, "Status() counting x in Error", func() bool { return r.Status().Objects.Error == 1 })
}

// Finding 8: a Prune that hangs past its timeout does not stop the other
// objects.
func TestRegressHungPruneIsAbandoned(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)
	pruning, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	ops := newScriptedOps(func(context.Context, string, int, *testObject) error { return nil })
	ops.prune = func(context.Context) error {
		signal(pruning)
		<-release // ignores ctx
		return nil
	}
	r := mustNew(t, f, testConfig(f, ops, reconciler.Config[*testObject]{Concurrency: 4, OperationTimeout: 30 * time.Millisecond}))
	f.insert(t, &testObject{ID: "first", Status: reconciler.StatusPending()})
	f.markInit()
	<-pruning
	rev := f.insert(t, &testObject{ID: "x", Status: reconciler.StatusPending()})
	if err := r.WaitUntilSettled(ctx, rev); err != nil {
		t.Fatalf("x not reconciled while the prune hangs: %s", err)
	}
	if got := f.get("x").Status.Kind; got != reconciler.StatusKindDone {
		t.Errorf("x is %s, want Done", got)
	}
	f.waitFor(ctx, t, "the prune reported as timed out", func() bool {
		return strings.Contains(r.Status().LastFull.Error, "timed out")
	})
}

// Finding 9: the waits return an error, not nil, while a misconfiguration
// keeps every object from being reconciled.
func TestRegressWaitReportsMisconfiguration(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)
	f.markInit()
	ops := newScriptedOps(func(context.Context, string, int, *testObject) error { return nil })
	cfg := testConfig(f, ops, reconciler.Config[*testObject]{})
	cfg.CloneObject = func(o *testObject) *testObject { return o } // not a copy
	r := mustNew(t, f, cfg)
	rev := f.insert(t, &testObject{ID: "x", Status: reconciler.StatusPending()})
	err := r.WaitUntilSettled(ctx, rev)
	if !errors.Is(err, reconciler.ErrInvalidConfig) {
		t.Fatalf("WaitUntilSettled = %v, want an error wrapping ErrInvalidConfig", err)
	}
	if _, _, err := r.WaitUntilReconciled(ctx, rev); !errors.Is(err, reconciler.ErrInvalidConfig) {
		t.Fatalf("WaitUntilReconciled = %v, want an error wrapping ErrInvalidConfig", err)
	}
	// The table and Status() agree: x is Error, and says why (the
	// status is written through a plain copy of the object).
	f.waitFor(ctx, t, "x written Error", func() bool { return f.get("x").Status.Kind == reconciler.StatusKindError })
	if got := f.get("x").Status.Error; !strings.Contains(got, "CloneObject returned the object itself") {
		t.Errorf("x's error %q does not say CloneObject is broken", got)
	}
	if got := r.Status().Objects; got.Error != 1 || got.Pending != 0 {
		t.Errorf("Status() counts %+v, want x in Error as the table says", got)
	}
}

// Finding 10: once failures stop being the same, the breaker closes and
// every object is retried on its own schedule again.
func TestRegressBreakerClosesOnDifferentErrors(t *testing.T) {
	f, ctx := startFixture(t, 20*time.Second)
	f.markInit()
	var mu sync.Mutex
	same := true
	ops := newScriptedOps(func(_ context.Context, key string, n int, _ *testObject) error {
		mu.Lock()
		defer mu.Unlock()
		if same {
			return errors.New("connection refused")
		}
		return fmt.Errorf("%s: attempt %d failed", key, n)
	})
	r := mustNew(t, f, testConfig(f, ops, reconciler.Config[*testObject]{
		RetryBackoffMin: time.Millisecond, RetryBackoffMax: 5 * time.Millisecond}))
	const n = 64
	objs := make([]*testObject, n)
	for i := range objs {
		objs[i] = &testObject{ID: fmt.Sprintf("k%02d", i), Status: reconciler.StatusPending()}
	}
	f.insert(t, objs...)
	f.waitFor(ctx, t, "every object failing", func() bool { return r.Status().Objects.Error == n })
	// The breaker is open now (64 identical failures): canaries only.
	mu.Lock()
	same = false
	mu.Unlock()
	before := map[string]int{}
	for _, o := range objs {
		before[o.ID] = ops.count(o.ID)
	}
	// Each object on its own 1-5ms schedule makes 10 attempts in well
	// under a second; canaries at most every 250ms would take minutes.
	deadline, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	f.waitFor(deadline, t, "10 more attempts of every object", func() bool {
		for _, o := range objs {
			if ops.count(o.ID) < before[o.ID]+10 {
				return false
			}
		}
		return true
	})
}

// Finding 11: the retry of a failed refresh hands Update the object as
// Refreshing, as the first attempt did.
func TestRegressRetryKeepsRefreshing(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)
	f.markInit()
	var refreshes int
	ops := newScriptedOps(func(_ context.Context, _ string, _ int, obj *testObject) error {
		if obj.Status.Kind == reconciler.StatusKindRefreshing {
			if refreshes++; refreshes == 1 {
				return errors.New("the refresh fails once")
			}
		}
		return nil
	})
	r := mustNew(t, f, testConfig(f, ops, reconciler.Config[*testObject]{
		RefreshInterval: time.Nanosecond, FullReconciliationInterval: reconciler.Off,
		RetryBackoffMin: time.Millisecond, RetryBackoffMax: time.Millisecond}))
	rev := f.insert(t, &testObject{ID: "x", Status: reconciler.StatusPending()})
	if err := r.WaitUntilSettled(ctx, rev); err != nil {
		t.Fatal(err)
	}
	r.TriggerFullReconciliation()
	f.waitFor(ctx, t, "the retried refresh", func() bool { return ops.count("x") >= 3 })
	ops.mu.Lock()
	seen := ops.seen[:3]
	ops.mu.Unlock()
	want := []reconciler.StatusKind{reconciler.StatusKindPending, reconciler.StatusKindRefreshing, reconciler.StatusKindRefreshing}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("Update saw %v, want %v: the retry must say it is a refresh", seen, want)
		}
	}
}
