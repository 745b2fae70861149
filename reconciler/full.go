package reconciler

import (
	"context"
	"maps"
	"time"

	"github.com/cilium/statedb"
)

// fullState tracks full reconciliation: Prune with every desired object.
// (Refresh runs on a schedule of its own: refresh.go.)
type fullState[Obj any] struct {
	wanted  bool      // requested: on start, by the timer or by a trigger
	pruning bool      // the prune's result is awaited
	running bool      // the prune still executes (it may be overdue)
	attempt uint64    // the awaited prune's attempt id
	since   time.Time // when the current one began waiting for in-flight work
	lastErr error     // the last prune's error, reported in health
	// postponed is set while operations past their timeout still run: a
	// prune waits for them rather than run beside them, and the other
	// objects keep flowing meanwhile.
	postponed bool
	// touched holds the keys whose Update started while an abandoned
	// prune still ran: its snapshot predates them, so it may remove what
	// they applied. Once it returns they move to repair, and each is
	// applied again (marked Refreshing) once its attempt has settled
	// Done: an attempt still running then may have applied before the
	// prune removed it.
	// Each key maps to its primary-key query: no object copy is kept
	// outside the model of outstanding work.
	touched map[string]statedb.Query[Obj]
	repair  map[string]statedb.Query[Obj]
}

// abandoned reports whether a prune past its timeout still runs.
func (f *fullState[Obj]) abandoned() bool { return f.running && !f.pruning }

// draining reports whether new operations are held back so that a prune
// can run alone.
func (f *fullState[Obj]) draining() bool { return f.pruning || f.since != (time.Time{}) }

// stepFull starts a full reconciliation when one is wanted, the table is
// initialized (pruning a half-filled table would delete real state) and
// no Update or Delete is running.
func (l *loop[Obj]) stepFull(ctx context.Context, now time.Time, ts *loopTimers) {
	if !l.full.wanted || l.suspended() || l.full.pruning || l.full.running || !l.pruneAllowed(ts) {
		return
	}
	if l.full.since.IsZero() {
		l.full.since = now
	}
	if running := l.work.running; running > 0 {
		// Prune never runs beside an Update or Delete: wait for the
		// operations in flight (the last to return wakes the loop). But
		// when all that is left are operations past their timeout,
		// waiting would stop every other object for as long as they
		// hang: postpone, keep reconciling, and look again when one
		// returns.
		if stuck := l.overdueRunning(); stuck > 0 && running <= stuck {
			if !l.full.postponed {
				l.log.Warn("Full reconciliation postponed: operations are stuck past their timeout", "stuck", stuck)
			}
			l.full.since, l.full.postponed = time.Time{}, true
		}
		return
	}
	l.full.wanted, l.full.postponed = false, false
	l.full.pruning, l.full.running = true, true
	l.work.lastAttempt++
	l.full.attempt = l.work.lastAttempt
	ts.full.Disarm()
	t := task[Obj]{op: OpPrune, txn: l.db.ReadTxn(), attempt: l.full.attempt}
	if l.cfg.Ownership != nil {
		// The worker reads it while the loop goes on: a copy. A prune
		// walks the table anyway.
		t.unowned = maps.Clone(l.work.unowned)
		if t.unowned == nil {
			t.unowned = map[string]statedb.Revision{}
		}
	}
	l.exec.Submit(ctx, t)
}

// pruneAllowed reports whether the desired set is complete enough to
// prune against (feed.desiredComplete).
func (l *loop[Obj]) pruneAllowed(ts *loopTimers) bool {
	ok, wait := l.desiredComplete(l.db, l.cfg.Table, l.cfg.InitialPruneDelay, l.log)
	if wait > 0 {
		ts.full.Arm(wait)
	}
	return ok
}

// overdueRunning counts the operations still executing past their
// timeout. (One whose result is only no longer wanted, superseded or
// disowned, is not stuck: the prune waits for it.)
func (l *loop[Obj]) overdueRunning() int {
	n := 0
	for _, r := range l.work.byKey {
		if r.stuck {
			n++
		}
	}
	return n
}

// pruneDone handles the prune's result: report it and schedule the next
// full reconciliation. A prune past its timeout is
// reported failed at once; it may run on, and no other prune starts until
// it returns.
func (l *loop[Obj]) pruneDone(res *result[Obj], now time.Time, ts *loopTimers) {
	if !res.overdue {
		if l.full.abandoned() {
			// Repaired after this commit's writes (commit calls
			// repairTouched): a result in it may be one of them.
			if l.full.repair == nil {
				l.full.repair = l.full.touched
			} else {
				maps.Copy(l.full.repair, l.full.touched)
			}
			l.full.touched = nil
		}
		l.full.running = false
	}
	if !l.full.pruning || res.attempt != l.full.attempt {
		return // the result of a prune already reported overdue
	}
	err := res.err
	if res.overdue {
		err = timeoutError(OpPrune, l.cfg.OperationTimeout)
		l.log.Warn("Prune ran past its timeout; abandoned, retried later", "timeout", l.cfg.OperationTimeout)
	}
	l.full.pruning = false
	l.metrics.FullReconciliation(now.Sub(l.full.since), err)
	l.lastFull = FullInfo{At: now, Duration: now.Sub(l.full.since)}
	l.full.since = time.Time{}
	l.full.lastErr = err
	l.status.dirty = true
	switch {
	case err != nil:
		l.lastFull.Error = err.Error()
		if !res.overdue {
			l.log.Warn("Prune failed; retried at the next full reconciliation", "error", err)
		}
	case res.notOwned:
		// Another replica holds the whole set's claim: it prunes.
		// Refresh of the keys owned here goes on all the same.
		l.log.Debug("Prune skipped: this replica does not hold the claim of the whole set")
	default:
		l.settleFailedDeletes()
	}
	if l.cfg.FullReconciliationInterval != Off {
		ts.full.Arm(l.cfg.FullReconciliationInterval)
	}
}

// repairTouched marks Refreshing the objects an abandoned prune may have
// removed (fullState.repair) once they are Done, so that Update applies
// them again. One whose attempt still runs waits for its result; one that
// is gone, failed or queued again is reconciled after the prune anyway.
func (l *loop[Obj]) repairTouched(now time.Time) {
	wtxn := l.db.WriteTxn(l.cfg.Table)
	for key, q := range l.full.repair {
		obj, rev, found := l.cfg.Table.Get(wtxn, q)
		if found && l.cfg.GetObjectStatus(obj).Kind != StatusKindDone {
			if r := l.work.byKey[key]; r != nil && (r.running != 0 || r.state == stCommitting) {
				continue // may have applied before the prune removed it; or its Done is being written
			}
		}
		delete(l.full.repair, key)
		if !found || l.cfg.GetObjectStatus(obj).Kind != StatusKindDone || !l.ownsKey(key) {
			continue // gone, moved on, or another replica's to repair
		}
		clone, err := l.clone(obj)
		if err != nil {
			continue
		}
		obj = l.cfg.SetObjectStatus(clone, Status{Kind: StatusKindRefreshing, UpdatedAt: now, ID: newStatusID()})
		l.cfg.Table.CompareAndSwap(wtxn, rev, obj)
	}
	wtxn.Commit()
}

// settleFailedDeletes forgets the failed deletes after a successful prune:
// the prune was given every desired object and ran with no operation in
// flight, so it removed what the failed deletes left in the target. (A key
// inserted again since is reconciled by Update as usual.)
func (l *loop[Obj]) settleFailedDeletes() {
	if l.work.failingDeletes == 0 {
		return
	}
	for _, r := range l.work.byKey {
		if r.deleted && r.err != "" && (r.state == stRetrying || r.state == stHeld) {
			l.work.settle(r)
		}
	}
}
