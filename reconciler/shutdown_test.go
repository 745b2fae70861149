package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// The shutdown tests stop the hive while operations are in flight and
// check the rules of the design: in-flight operations see their context
// cancelled, no status is written and no operation starts once the stop
// has begun, no goroutine survives, and a new hive over the same state
// picks up where the table is.

func TestShutdownMidRound(t *testing.T) {
	for _, sc := range []stopConfig{
		{concurrency: 1},
		{concurrency: 16},
		{concurrency: 4, batch: true},
		{concurrency: 4, timeout: time.Hour},
	} {
		t.Run(fmt.Sprintf("concurrency=%d/batch=%v/timeout=%s", sc.concurrency, sc.batch, sc.timeout), func(t *testing.T) {
			testShutdownMidRound(t, sc)
		})
	}
}

// testShutdownMidRound stops the hive while every worker is blocked in an
// operation and more objects wait for a worker, then starts a new hive over
// a copy of the table.
func testShutdownMidRound(t *testing.T, sc stopConfig) {
	leaks := goleak.IgnoreCurrent()
	target := fake.New(wrappers)
	blocking := func(key string) bool { return strings.HasPrefix(key, "block") }
	ops := newStopOps(target, blocking)

	// Three objects reconciled before the trouble starts.
	h := startStopHarness(t, ops, sc, pendingObjects("done", 3))
	h.settle()
	h.waitStarted(3)

	// Fill every worker (a batch blocks at its first entry), with more
	// objects waiting behind them.
	inFlight := sc.concurrency
	if sc.batch {
		inFlight = 1
	}
	h.insert(append(pendingObjects("block", sc.concurrency), pendingObjects("later", 5)...)...)
	h.waitStarted(inFlight)
	before := h.state()

	if err := h.stop(10 * time.Second); err != nil {
		t.Fatalf("hive stop: %s", err)
	}
	after := h.state()

	checkStoppedMidRound(t, h, sc, blocking, inFlight, before, after)
	goleak.VerifyNone(t, leaks)
	if t.Failed() {
		return
	}

	checkRestartAfterStop(t, h, target, sc)
	goleak.VerifyNone(t, leaks)
}

// TestShutdownOperationIgnoresContext stops the hive while an operation
// ignores its cancelled context. Stop waits for it until a little before
// Stop's own deadline (with OperationTimeout, that long and a short grace
// at most), then returns without an error, having given up on it; the
// operation returns (successfully) afterwards. Nothing may be written or
// started after that, and once the operation returns every goroutine
// ends.
func TestShutdownOperationIgnoresContext(t *testing.T) {
	for _, sc := range []stopConfig{
		{concurrency: 1},
		{concurrency: 3},
		// The operations overrun their timeout before the stop: their
		// workers hand their places to new ones, which start more.
		{concurrency: 1, timeout: 20 * time.Millisecond},
		{concurrency: 2, batch: true, timeout: 20 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("concurrency=%d/batch=%v/timeout=%s", sc.concurrency, sc.batch, sc.timeout), func(t *testing.T) {
			testShutdownIgnoresContext(t, sc)
		})
	}
}

func testShutdownIgnoresContext(t *testing.T, sc stopConfig) {
	leaks := goleak.IgnoreCurrent()
	target := fake.New(wrappers)
	ops := newStopOps(target, func(key string) bool { return strings.HasPrefix(key, "block") })
	ops.ignoreCtx = true

	h := startStopHarness(t, ops, sc, nil)
	h.insert(pendingObjects("block", 2*sc.concurrency+2)...)
	inFlight := sc.concurrency
	switch {
	case sc.batch:
		inFlight = 1
		if sc.timeout > 0 {
			inFlight = 2 // the batch overruns; its replacement takes the next round's batch
			time.Sleep(sc.timeout)
			h.insert(pendingObjects("blockmore", 2)...)
		}
	case sc.timeout > 0:
		inFlight = 2 * sc.concurrency // at most Concurrency workers are abandoned
	}
	h.waitStarted(inFlight)
	time.Sleep(2 * sc.timeout) // let any overrun hand-off happen before the stop
	startedBefore := inFlight + len(h.ops.started)

	// The reconciler gives up on the operations before Stop's deadline:
	// Stop returns, and the jobs and hooks after it are stopped too.
	if err := h.stop(300 * time.Millisecond); err != nil {
		t.Errorf("hive.Stop with an operation ignoring its context: %v, want it to give up on the operation and return", err)
	}
	snapshot := h.state()

	// Let the operations return, successfully, after Stop returned; then
	// every goroutine ends.
	close(ops.release)
	goleak.VerifyNone(t, leaks)

	if s := h.state(); s.rev != snapshot.rev || !maps.Equal(s.objs, snapshot.objs) {
		t.Errorf("table changed after Stop returned:\nat Stop (rev %d): %v\nnow (rev %d): %v", snapshot.rev, snapshot.objs, s.rev, s.objs)
	}
	recs := h.ops.records()
	if len(recs) != startedBefore {
		t.Errorf("%d operations ran, %d had started before Stop", len(recs), startedBefore)
	}
	for _, rec := range recs {
		if rec.afterStopCalled {
			t.Errorf("operation on %s started after Stop was called", rec.key)
		}
		if rec.ctxErr == nil {
			t.Errorf("operation on %s never saw its context end", rec.key)
		}
	}
	overdue := 0
	for _, obj := range h.objects() {
		switch {
		case sc.timeout > 0 && obj.Status.Kind == reconciler.StatusKindError && strings.Contains(obj.Status.Error, "timed out"):
			// Overran before the stop: failed at its deadline; its late
			// success, after the stop, is not written.
			overdue++
		case obj.Status.Kind != reconciler.StatusKindPending:
			t.Errorf("%s is %s %q, want Pending (or, overrun before the stop, Error: timed out)", obj.ID, obj.Status.Kind, obj.Status.Error)
		}
	}
	if sc.timeout > 0 && overdue == 0 {
		t.Errorf("no object failed at its deadline, though the operations overran before the stop")
	}
}

// TestRestartOverErrorObjects: a new hive over a table that holds an object
// in Error (its last attempt failed, its retry was scheduled in the old
// hive's memory). The design's "nothing is lost" asks that it end Done
// once the target accepts it.
func TestRestartOverErrorObjects(t *testing.T) {
	for _, refresh := range []time.Duration{reconciler.Off, 20 * time.Millisecond} {
		name := "refresh=" + refresh.String()
		if refresh == reconciler.Off {
			name = "refresh=off"
		}
		t.Run(name, func(t *testing.T) {
			target := fake.New(wrappers)
			ops := newBadOps(target)
			ops.set("bad", func() error { return errors.New("target down") })
			start := func(objs []*testObject) (*fixture, reconciler.Reconciler[*testObject]) {
				f := newFixture(t)
				if err := f.hive.Start(f.log, context.Background()); err != nil {
					t.Fatalf("hive start: %s", err)
				}
				f.load(objs)
				r, err := reconciler.New(testConfig(f, ops, reconciler.Config[*testObject]{
					RetryBackoffMin:            time.Millisecond,
					RetryBackoffMax:            10 * time.Millisecond,
					FullReconciliationInterval: 50 * time.Millisecond,
					RefreshInterval:            refresh,
				}), f.params)
				if err != nil {
					t.Fatalf("reconciler.New: %s", err)
				}
				return f, r
			}
			objects := func(f *fixture) []*testObject {
				var objs []*testObject
				for obj := range f.table.All(f.db.ReadTxn()) {
					objs = append(objs, obj.Clone())
				}
				return objs
			}

			f1, r1 := start([]*testObject{{ID: "ok", Value: "1"}, {ID: "bad", Value: "1"}})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, _, err := r1.WaitUntilReconciled(ctx, f1.table.Revision(f1.db.ReadTxn())); err != nil {
				t.Fatalf("not attempted: %s", err)
			}
			if err := f1.hive.Stop(f1.log, context.Background()); err != nil {
				t.Fatalf("hive stop: %s", err)
			}
			carried := objects(f1)
			for _, obj := range carried {
				t.Logf("carried over: %s %s %q", obj.ID, obj.Status.Kind, obj.Status.Error)
			}

			// The target recovers while the agent restarts.
			ops.set("bad", nil)
			f2, r2 := start(carried)
			defer func() {
				if err := f2.hive.Stop(f2.log, context.Background()); err != nil {
					t.Errorf("hive stop: %s", err)
				}
			}()
			ctx, cancel = context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := reconciler.WaitForReconciliation(ctx, f2.db, f2.table.ToTable(), statusIndex)
			bad, _, _ := f2.table.Get(f2.db.ReadTxn(), idIndex.Query("bad"))
			if err == nil {
				t.Logf("bad ended %s after the restart", bad.Status.Kind)
				return
			}
			snap := r2.Status()
			knownBug(t, "an object carried into a new hive in Error is never retried (RefreshInterval %s): "+
				"still %s %q after 1s, and Status() counts %d Error, %d Done: the new reconciler does not know it failed; "+
				"round.go onChange ignores objects that are not Pending or Refreshing, and the retry was in the old hive's memory",
				refresh, bad.Status.Kind, bad.Status.Error, snap.Objects.Error, snap.Objects.Done)
		})
	}
}

// checkStoppedMidRound checks what testShutdownMidRound's stop left: the
// in-flight operations saw a cancelled context, nothing started after
// Stop was called, and the table did not change during Stop.
func checkStoppedMidRound(t *testing.T, h *stopHarness, sc stopConfig, blocking func(string) bool, inFlight int, before, after tableState) {
	t.Helper()
	// In-flight operations saw their context cancelled by the stop, not
	// by a timeout; nothing started once Stop was called.
	recs := h.ops.records()
	blocked := 0
	for _, rec := range recs {
		switch {
		case rec.afterStopCalled:
			t.Errorf("operation on %s started after Stop was called", rec.key)
		case blocking(rec.key):
			blocked++
			if !errors.Is(rec.ctxErr, context.Canceled) {
				t.Errorf("operation on %s returned with context error %v, want %v", rec.key, rec.ctxErr, context.Canceled)
			}
		}
	}
	if blocked != inFlight {
		t.Errorf("%d blocked operations ended, want %d", blocked, inFlight)
	}
	if n := len(h.ops.started); n > 0 {
		t.Errorf("%d more operation(s) started after the workers were full", n)
	}

	// The blocked operations reported success after the stop began: none
	// of it may reach the table, before or after Stop returned.
	if !maps.Equal(before.objs, after.objs) || before.rev != after.rev {
		t.Errorf("table changed during Stop:\nbefore (rev %d): %v\nafter (rev %d): %v", before.rev, before.objs, after.rev, after.objs)
	}
	for _, obj := range h.objects() {
		want := reconciler.StatusKindPending
		if strings.HasPrefix(obj.ID, "done") {
			want = reconciler.StatusKindDone
		}
		if obj.Status.Kind != want {
			t.Errorf("%s is %s after Stop, want %s", obj.ID, obj.Status.Kind, want)
		}
	}
}

// checkRestartAfterStop starts a new hive over the table as it was at
// Stop (an agent restoring it) and the same target: the Pending objects
// are reconciled, the Done ones are left alone.
func checkRestartAfterStop(t *testing.T, h *stopHarness, target *fake.Target, sc stopConfig) {
	t.Helper()
	ops2 := newStopOps(target, func(string) bool { return false })
	h2 := startStopHarness(t, ops2, sc, h.objects())
	h2.settle()
	if err := h2.stop(10 * time.Second); err != nil {
		t.Fatalf("hive stop: %s", err)
	}
	var keys []string
	for _, rec := range ops2.records() {
		keys = append(keys, rec.key)
	}
	slices.Sort(keys)
	var want []string
	for _, obj := range h.objects() {
		if !strings.HasPrefix(obj.ID, "done") {
			want = append(want, obj.ID)
		}
	}
	if !slices.Equal(keys, want) {
		t.Errorf("after the restart, operations on %v, want %v", keys, want)
	}
	state := target.State()
	for _, obj := range h.objects() {
		if state[obj.ID] != obj.Value {
			t.Errorf("target has %s=%q, want %q", obj.ID, state[obj.ID], obj.Value)
		}
	}
}
