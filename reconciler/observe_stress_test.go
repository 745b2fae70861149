package reconciler_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// TestObserverUnderLoad: with several workers, the ordered mode (a
// priority and a target per object), failing keys, changes of keys in
// flight and deletes, every attempt an observer is told of started and
// finished once, on a worker, with the object's priority and target; the
// last committed event of every live key is its Done, written.
func TestObserverUnderLoad(t *testing.T) {
	f, ctx := startFixture(t, time.Minute)
	rec := &recorder{}
	cfg := observedConfig(f, "load", rec)
	cfg.Concurrency = 4
	cfg.Priority = func(o *testObject) int { return len(o.Value) }
	cfg.TargetKey = func(o *testObject) string { return "t" + o.ID[len(o.ID)-1:] }
	cfg.TargetConcurrency = 2
	r, err := reconciler.New(cfg, f.params)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		f.target("load").SetFault(fmt.Sprintf("k%03d", i*7), fake.Fault{Mode: fake.ModeError, Count: 2})
	}
	f.load(nil)
	for i := range 150 {
		insertPending(f, &testObject{ID: fmt.Sprintf("k%03d", i), Value: "v"})
		if i == 0 {
			// The reconciler's job starts on its own: until its change
			// iterator is open, an object inserted and deleted is never
			// seen, and has nothing to commit. Wait until it has read one.
			if _, _, err := r.WaitUntilReconciled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 50 {
		insertPending(f, &testObject{ID: fmt.Sprintf("k%03d", i*3), Value: "vv"})
	}
	wtxn := f.db.WriteTxn(f.table)
	for i := range 10 {
		if _, _, err := f.table.Delete(wtxn, &testObject{ID: fmt.Sprintf("k%03d", 100+i)}); err != nil {
			t.Fatal(err)
		}
	}
	wtxn.Commit()
	settleObserved(t, ctx, f, r)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	checkStartsFinish(t, rec.events)
	checkLastCommits(t, rec.events)
}

// checkStartsFinish checks that every started attempt finished once, on a
// worker, with its object's target and priority.
func checkStartsFinish(t *testing.T, events []reconciler.Event) {
	type key struct {
		k       string
		attempt int
		rev     uint64
	}
	open := map[key]int{}
	for _, e := range events {
		switch e.Kind {
		case reconciler.EventStarted:
			open[key{e.Key, e.Attempt, uint64(e.Revision)}]++
			if e.Worker < 1 || e.Target != "t"+e.Key[len(e.Key)-1:] {
				t.Errorf("started %s: worker %d, target %q", e.Key, e.Worker, e.Target)
			}
			if !e.Deleted && e.Priority != 1 && e.Priority != 2 {
				t.Errorf("started %s: priority %d", e.Key, e.Priority)
			}
		case reconciler.EventFinished:
			k := key{e.Key, e.Attempt, uint64(e.Revision)}
			if open[k] == 0 {
				t.Errorf("finished %s attempt %d with no start", e.Key, e.Attempt)
			}
			open[k]--
		}
	}
	for k, n := range open {
		if n != 0 {
			t.Errorf("%s attempt %d: %d started and not finished", k.k, k.attempt, n)
		}
	}
}

// checkLastCommits checks that the last committed event of each of the
// 150 keys is its Done, written, or, for the deleted ones, their delete.
func checkLastCommits(t *testing.T, events []reconciler.Event) {
	lastCommit := map[string]reconciler.Event{}
	for _, e := range events {
		if e.Kind == reconciler.EventCommitted {
			lastCommit[e.Key] = e
		}
	}
	for i := range 150 {
		id := fmt.Sprintf("k%03d", i)
		e, ok := lastCommit[id]
		deleted := i >= 100 && i < 110
		switch {
		case !ok:
			t.Errorf("%s: never committed", id)
		case deleted && !e.Deleted:
			t.Errorf("%s: deleted, its last commit %+v", id, e)
		case !deleted && (e.Status != reconciler.StatusKindDone || e.Commit != reconciler.CommitWritten):
			t.Errorf("%s: its last commit is %s %s", id, e.Status, e.Commit)
		}
	}
}
