package reconciler_test

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// The chaos test's driver steps (chaos_test.go): random writes, the wait
// for convergence once the faults stop, and the comparison with the model.

// write commits one transaction of n random changes: updates and deletes
// of live keys, inserts and re-inserts of the others.
func (c *chaosRun) write(n int) {
	f := c.f
	wtxn := f.db.WriteTxn(f.table)
	for range n {
		// Every change draws the same numbers, so the seed's stream
		// stays aligned whatever key the timing-dependent busyKey picks.
		key := fmt.Sprintf("k%03d", c.rng.IntN(chaosKeys))
		pick, del, unset := c.rng.Uint64(), c.rng.IntN(100) < 45, c.rng.IntN(4) == 0
		if pick%3 == 0 {
			// A third of the changes hit keys that are likely busy.
			if k := c.ops.busyKey(pick / 3); k != "" {
				key = k
			}
		}
		c.stats.changes.Add(1)
		if c.model.live[key] && del {
			if _, _, err := f.table.Delete(wtxn, &testObject{ID: key}); err != nil {
				c.t.Fatalf("delete: %s", err)
			}
			c.model.live[key] = false
			c.stats.deletes.Add(1)
			continue
		}
		if _, seen := c.model.version[key]; seen && !c.model.live[key] {
			c.stats.reinserts.Add(1)
		}
		c.model.version[key]++
		c.model.live[key] = true
		obj := &testObject{ID: key, Value: c.model.value(key), Status: reconciler.StatusPending()}
		if unset {
			obj.Status = reconciler.Status{} // an unset status is Pending too
		}
		if _, _, err := f.table.Insert(wtxn, obj); err != nil {
			c.t.Fatalf("insert: %s", err)
		}
	}
	wtxn.Commit()
}

// converge waits, within chaosConvergeBound of the faults stopping, for a
// successful prune, for every change to settle, and for the table and the
// target to match the model with every object Done.
func (c *chaosRun) converge() {
	t, f := c.t, c.f
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), chaosConvergeBound)
	defer cancel()
	if c.suspended {
		c.r.Resume()
		c.suspended = false
	}

	// Keys deleted while the hive was down are known only to the target:
	// only a prune removes them. Ask for one that runs without faults.
	prunes, pruned := c.ops.PrunesOK()
	c.r.TriggerFullReconciliation()
	for n := prunes; n == prunes; n, pruned = c.ops.PrunesOK() {
		select {
		case <-pruned:
		case <-ctx.Done():
			t.Fatalf("no successful prune within %s of the faults stopping; status: %+v", chaosConvergeBound, c.r.Status())
		}
	}

	if err := c.r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatalf("changes did not settle within %s of the faults stopping: %s; status: %+v", chaosConvergeBound, err, c.r.Status())
	}
	for {
		changed := c.target.Changed()
		objs, watch := f.table.AllWatch(f.db.ReadTxn())
		diffs := c.diff(objs, c.target.State(), true)
		if len(diffs) == 0 {
			break
		}
		select {
		case <-watch:
		case <-changed:
		case <-ctx.Done():
			c.stats.lost.Add(int64(len(diffs)))
			t.Fatalf("not converged within %s of the faults stopping; %d difference(s), first: %s; status: %+v",
				chaosConvergeBound, len(diffs), strings.Join(diffs[:min(len(diffs), 10)], "; "), c.r.Status())
		}
	}
	d := time.Since(start)
	if int64(d) > c.stats.convergeNs.Load() {
		c.stats.convergeNs.Store(int64(d))
	}
	c.stats.checked.Add(int64(len(c.model.version)))
}

// diff lists how the table (when given) and the target differ from the
// model.
func (c *chaosRun) diff(objs iter.Seq2[*testObject, statedb.Revision], state map[string]string, withTable bool) []string {
	var diffs []string
	if withTable {
		inTable := map[string]bool{}
		for obj := range objs {
			inTable[obj.ID] = true
			switch {
			case !c.model.live[obj.ID]:
				diffs = append(diffs, fmt.Sprintf("%s in the table but deleted", obj.ID))
			case obj.Value != c.model.value(obj.ID):
				diffs = append(diffs, fmt.Sprintf("%s=%s in the table, want %s", obj.ID, obj.Value, c.model.value(obj.ID)))
			case obj.Status.Kind != reconciler.StatusKindDone:
				diffs = append(diffs, fmt.Sprintf("%s is %s (%s)", obj.ID, obj.Status.Kind, obj.Status.Error))
			}
		}
		for key, live := range c.model.live {
			if live && !inTable[key] {
				diffs = append(diffs, fmt.Sprintf("%s missing from the table", key))
			}
		}
	}
	for key := range c.model.version {
		got, ok := state[key]
		switch {
		case c.model.live[key] && !ok:
			diffs = append(diffs, fmt.Sprintf("%s missing from the target, want %s", key, c.model.value(key)))
		case c.model.live[key] && got != c.model.value(key):
			diffs = append(diffs, fmt.Sprintf("%s=%s in the target, want %s", key, got, c.model.value(key)))
		case !c.model.live[key] && ok:
			diffs = append(diffs, fmt.Sprintf("%s=%s in the target, but deleted", key, got))
		}
	}
	for key := range state {
		if _, known := c.model.version[key]; !known {
			diffs = append(diffs, fmt.Sprintf("%s in the target, never desired", key))
		}
	}
	return diffs
}

// check is the verdict after the last hive stopped: the target still
// matches the model, no rule was broken, and no stopped hive's table
// changed after its Stop returned.
func (c *chaosRun) check() {
	t := c.t
	diffs := c.diff(nil, c.target.State(), false)
	c.stats.lost.Add(int64(len(diffs)))
	if len(diffs) > 0 {
		t.Errorf("after the last Stop, %d key(s) differ: %s", len(diffs), strings.Join(diffs[:min(len(diffs), 10)], "; "))
	}
	for _, p := range c.ops.Problems() {
		t.Errorf("rule broken: %s", p)
	}
	if o := c.target.Overlaps(); len(o) > 0 {
		t.Errorf("overlapping operations on %v", o)
	}
	for i, s := range c.stopped {
		if rev := s.table.Revision(s.db.ReadTxn()); rev != s.rev {
			t.Errorf("hive %d: table changed after Stop returned: revision %d, was %d", i, rev, s.rev)
		}
	}
}

// TestStuckOperationDoesNotStallFullReconciliation: an operation that
// ignores its context must harm only its own object. The worker hand-off
// keeps the other objects flowing past it; a full reconciliation that
// becomes due meanwhile must not wait for the stuck operation while holding
// back all new work (it did, until full reconciliations were postponed
// while only stuck operations are in flight).
func TestStuckOperationDoesNotStallFullReconciliation(t *testing.T) {
	target := fake.New(wrappers)
	ops := newStopOps(target, func(key string) bool { return key == "stuck" })
	ops.ignoreCtx = true
	f := newFixture(t)
	if err := f.hive.Start(f.log, context.Background()); err != nil {
		t.Fatalf("hive start: %s", err)
	}
	f.markInit()
	r, err := reconciler.New(testConfig(f, ops, reconciler.Config[*testObject]{
		OperationTimeout: 20 * time.Millisecond,
	}), f.params)
	if err != nil {
		t.Fatalf("reconciler.New: %s", err)
	}
	h := &stopHarness{t: t, f: f, r: r, ops: ops}
	t.Cleanup(func() {
		close(ops.release)
		if err := f.hive.Stop(f.log, context.Background()); err != nil {
			t.Errorf("hive stop: %s", err)
		}
	})

	h.insert(&testObject{ID: "stuck", Value: "v1"})
	h.waitStarted(1)
	r.TriggerFullReconciliation()
	h.insert(&testObject{ID: "other", Value: "v1"})
	select {
	case key := <-ops.started:
		t.Logf("%s reconciled beside the stuck operation", key)
	case <-time.After(2 * time.Second):
		t.Fatalf("no operation started within 2s while one was stuck past its timeout and a full reconciliation was due; status: %+v", r.Status())
	}
}
