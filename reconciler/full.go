package reconciler

import (
	"context"
	"iter"
	"maps"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler/internal/clock"
	"github.com/converge-go/converge/reconciler/internal/workers"
)

// Full reconciliation in the per-object loop: Prune with every desired
// object, once the table is initialized, every FullReconciliationInterval
// and on TriggerFullReconciliation. It never runs beside an Update or
// Delete: it waits for the operations in flight, and new ones wait for it.
// (Refresh runs on a schedule of its own: refresh.go.)

// fullState is where full reconciliation stands.
type fullState[Obj comparable] struct {
	*reconciler[Obj]
	t    *requests[Obj]
	exec *workers.Pool[task[Obj], result[Obj]]

	wanted  bool      // requested: on start, by the timer or by a trigger
	pruning bool      // the prune's result is awaited
	running bool      // the prune still executes (it may be overdue)
	attempt uint64    // the awaited prune's attempt id
	since   time.Time // when the current one began waiting for in-flight work
	lastErr error     // the last prune's error, reported in health
	last    FullInfo
	// snapRev is the revision of the awaited prune's snapshot; prunedTo
	// that of the latest that succeeded (WaitUntilPruned).
	snapRev, prunedTo statedb.Revision
	// postponed is set while operations past their timeout still run: a
	// prune waits for them rather than run beside them, and the other
	// objects keep flowing meanwhile.
	postponed bool
	// touched holds the keys whose Update started while an abandoned
	// prune still ran: its snapshot predates them, so it may remove what
	// they applied. Once it returns they move to repairing, and each is
	// applied again (marked Refreshing) once its attempt settled Done.
	// Each key maps to its primary-key query: no object is kept outside
	// the request table.
	touched, repairing map[string]statedb.Query[Obj]
}

// abandoned reports whether a prune past its timeout still runs.
func (f *fullState[Obj]) abandoned() bool { return f.running && !f.pruning }

// draining reports whether new operations are held back so that a prune
// can run alone.
func (f *fullState[Obj]) draining() bool { return f.pruning || !f.since.IsZero() }

// step starts a full reconciliation when one is wanted, the desired set is
// complete (pruning a half-filled table would delete real state) and no
// Update or Delete is running; when all that runs are operations past
// their timeout, it is postponed rather than stop every other object.
func (f *fullState[Obj]) step(ctx context.Context, now time.Time, fd *feed[Obj], timer *clock.Timer) {
	if !f.wanted || f.suspended() || f.pruning || f.running {
		return
	}
	if ok, wait := fd.desiredComplete(f.db, f.cfg.Table, f.cfg.InitialPruneDelay, f.log); !ok {
		if wait > 0 {
			timer.Arm(wait)
		}
		return
	}
	if f.since.IsZero() {
		f.since = now
	}
	if running := f.t.executing; running > 0 {
		// The last operation to return wakes the loop.
		if stuck := f.stuck(); stuck > 0 && running <= stuck {
			if !f.postponed {
				f.log.Warn("Full reconciliation postponed: operations are stuck past their timeout", "stuck", stuck)
			}
			f.since, f.postponed = time.Time{}, true
		}
		return
	}
	f.wanted, f.postponed = false, false
	f.pruning, f.running = true, true
	f.t.lastAttempt++
	f.attempt = f.t.lastAttempt
	timer.Disarm()
	t := task[Obj]{op: OpPrune, txn: f.db.ReadTxn(), attempt: f.attempt}
	f.snapRev = f.cfg.Table.Revision(t.txn)
	if f.cfg.Ownership != nil {
		// The worker reads it while the loop goes on: a copy. A prune
		// walks the table anyway.
		t.unowned = map[string]struct{}{}
		for key, r := range f.t.rows {
			if r.state == stNotOwned {
				t.unowned[key] = struct{}{}
			}
		}
	}
	f.exec.Submit(ctx, t)
}

// stuck counts the operations still executing past their timeout. (One
// whose result is only no longer wanted is not stuck: a prune waits.)
func (f *fullState[Obj]) stuck() int {
	n := 0
	for _, r := range f.t.rows {
		if r.stuck {
			n++
		}
	}
	return n
}

// touch records the keys of requests dispatched while an abandoned prune
// still runs.
func (f *fullState[Obj]) touch(taken []*request[Obj]) {
	if !f.abandoned() {
		return
	}
	if f.touched == nil {
		f.touched = map[string]statedb.Query[Obj]{}
	}
	for _, r := range taken {
		f.touched[r.key] = f.queryOf(r.obj)
	}
}

// done handles a prune's result: it reports it and schedules the next
// full reconciliation. A prune past its timeout is reported failed at
// once; it may run on, and no other prune starts until it returns.
func (f *fullState[Obj]) done(res *result[Obj], now time.Time, timer *clock.Timer) {
	if !res.overdue {
		if f.abandoned() {
			// Repaired after this commit's writes: a result in it may
			// be one of the keys touched.
			if f.repairing == nil {
				f.repairing = map[string]statedb.Query[Obj]{}
			}
			maps.Copy(f.repairing, f.touched)
			f.touched = nil
		}
		f.running = false
	}
	if !f.pruning || res.attempt != f.attempt {
		return // the result of a prune already reported overdue
	}
	err := res.err
	if res.overdue {
		err = timeoutError(OpPrune, f.cfg.OperationTimeout)
		f.log.Warn("Prune ran past its timeout; abandoned, retried later", "timeout", f.cfg.OperationTimeout)
	}
	f.pruning = false
	f.metrics.FullReconciliation(now.Sub(f.since), err)
	f.last = FullInfo{At: now, Duration: now.Sub(f.since)}
	f.since, f.lastErr = time.Time{}, err
	f.t.dirty = true
	switch {
	case err != nil:
		f.last.Error = err.Error()
		if !res.overdue {
			f.log.Warn("Prune failed; retried at the next full reconciliation", "error", err)
		}
	case res.notOwned:
		// Another replica holds the whole set's claim: it prunes.
		f.log.Debug("Prune skipped: this replica does not hold the claim of the whole set")
	default:
		f.settleFailedDeletes()
		f.prunedTo = f.snapRev
	}
	if f.cfg.FullReconciliationInterval != Off {
		timer.Arm(f.cfg.FullReconciliationInterval)
	}
}

// repairDue reports whether keys an abandoned prune may have undone wait
// to be applied again.
func (f *fullState[Obj]) repairDue() bool { return len(f.repairing) > 0 }

// repair marks Refreshing the objects an abandoned prune may have removed
// once they are Done, so that Update applies them again. One whose
// attempt still runs, or whose Done is being written, waits; one gone,
// failed or queued again is reconciled after the prune anyway.
func (f *fullState[Obj]) repair(now time.Time) {
	wtxn := f.db.WriteTxn(f.cfg.Table)
	for key, q := range f.repairing {
		obj, rev, found := f.cfg.Table.Get(wtxn, q)
		done := found && f.cfg.GetObjectStatus(obj).Kind == StatusKindDone
		if r := f.t.rows[key]; !done && r != nil && (r.running != 0 || r.state == stCommitting) {
			continue
		}
		delete(f.repairing, key)
		if !done || !f.ownsKey(key) {
			continue // gone, moved on, or another replica's to repair
		}
		if clone, err := f.clone(obj); err == nil {
			f.cfg.Table.CompareAndSwap(wtxn, rev, f.cfg.SetObjectStatus(clone, StatusRefreshing()))
		}
	}
	wtxn.Commit()
}

// settleFailedDeletes forgets the failed deletes after a successful prune:
// it was given every desired object and ran with no operation in flight,
// so it removed what they left in the target. (A key inserted again since
// is reconciled by Update as usual.)
func (f *fullState[Obj]) settleFailedDeletes() {
	if f.t.failingDeletes == 0 {
		return
	}
	for _, r := range f.t.rows {
		if r.detail != nil && r.deleted && r.err != "" && (r.state == stRetrying || r.state == stHeld) {
			f.t.settle(r)
		}
	}
}

// prunedSet is the objects of a prune's snapshot whose keys this
// replica owns. A key is left out only if the request table held it
// NotOwned when the prune was started (t.unowned, a copy) and Owns still
// says so now, under the claim Acquire(ctx, nil) gave: a key gained in
// between is kept, and so is a key not read yet, so that a Prune keeps
// rather than removes what it cannot place.
func prunedSet[Obj comparable](f *reconciler[Obj], t *task[Obj]) iter.Seq2[Obj, statedb.Revision] {
	all := f.cfg.Table.All(t.txn)
	if f.cfg.DependsOn != nil {
		all = depOrder(all, f.keyOf, f.cfg.DependsOn) // dependencies first
	}
	if t.unowned == nil {
		return all
	}
	return func(yield func(Obj, statedb.Revision) bool) {
		for obj, rev := range all {
			key := f.keyOf(obj)
			if _, unowned := t.unowned[key]; unowned && !f.cfg.Ownership.Owns(keyBytes(key)) {
				continue
			}
			if !yield(obj, rev) {
				return
			}
		}
	}
}
