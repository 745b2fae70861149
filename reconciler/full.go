package reconciler

import (
	"context"
	"time"

	"github.com/cilium/statedb"
	"golang.org/x/time/rate"
)

// fullState tracks full reconciliation: Prune, then refresh.
type fullState struct {
	wanted  bool      // requested: on start, by the timer or by a trigger
	pruning bool      // the prune task is out
	stuck   int       // postponed while this many operations were stuck past their deadline
	since   time.Time // when the current one began waiting for in-flight work
	lastErr error     // the last prune's error, reported in health
}

// draining reports whether new operations are held back so that a prune
// can run alone.
func (f *fullState) draining() bool { return f.pruning || f.since != (time.Time{}) }

// stepFull starts a full reconciliation when one is wanted, the table is
// initialized (pruning a half-filled table would delete real state) and
// no Update or Delete is running.
func (l *loop[Obj]) stepFull(now time.Time, ts *loopTimers) {
	if !l.full.wanted || !l.initialized || l.suspended() || l.full.pruning {
		return
	}
	if l.full.stuck > 0 {
		if int(l.abandoned.Load()) >= l.full.stuck {
			return // postponed until a stuck operation returns
		}
		l.full.stuck = 0
	}
	if l.full.since.IsZero() {
		l.full.since = now
	}
	if l.outJobs > 0 {
		// Results are still being written: wait for them to land (that
		// wakes the loop), so that the prune's outcome is judged against
		// a settled failing set (a successful prune settles the failed
		// deletes it finds there).
		return
	}
	if inFlight := l.results.inFlight(); inFlight > 0 {
		// Prune never runs beside an Update or Delete, so wait for the
		// operations in flight; the last result to arrive wakes the loop.
		// But if all that is left are operations stuck past their
		// deadline, waiting would stop every other object for as long as
		// they hang: postpone instead, keep reconciling, and try again
		// once one of them returns.
		if stuck := int(l.abandoned.Load()); stuck > 0 && inFlight <= stuck {
			l.full.since = time.Time{}
			l.full.stuck = stuck
			l.log.Warn("Full reconciliation postponed: operations are stuck past their timeout", "stuck", stuck)
		}
		return
	}
	l.full.wanted = false
	l.full.pruning = true
	ts.full.disarm()
	l.results.started(1)
	l.submit(task[Obj]{op: OpPrune, txn: l.db.ReadTxn()})
}

// pruneDone handles the prune's result: report it, start the refresh pass
// and schedule the next full reconciliation.
func (l *loop[Obj]) pruneDone(t *task[Obj], now time.Time, ts *loopTimers) {
	l.metrics.FullReconciliation(now.Sub(l.full.since), t.err)
	l.lastFull = FullInfo{At: now, Duration: now.Sub(l.full.since)}
	if t.err != nil {
		l.lastFull.Error = t.err.Error()
	}
	l.full.lastErr = t.err
	l.full.pruning = false
	l.full.since = time.Time{}
	l.status.dirty = true
	if t.err != nil {
		l.log.Warn("Prune failed; retried at the next full reconciliation", "error", t.err)
	} else {
		l.settleFailedDeletes()
	}
	if l.cfg.RefreshInterval != Off {
		l.refresh = refreshState[Obj]{active: true}
	}
	if l.cfg.FullReconciliationInterval != Off {
		ts.full.arm(l.cfg.FullReconciliationInterval)
	}
}

// settleFailedDeletes forgets the failed deletes after a successful prune:
// the prune was given every desired object and ran with no operation in
// flight, so it removed what the failed deletes left in the target. (A key
// inserted again since is reconciled by Update as usual.)
func (l *loop[Obj]) settleFailedDeletes() {
	if l.status.failingDeletes == 0 {
		return
	}
	for key, f := range l.status.failing {
		if !f.deleted {
			continue
		}
		if e, ok := l.retries.byKey[key]; ok && e.deleted {
			l.retries.remove(key)
		}
		l.status.clearFailing(key)
	}
}

// refreshState is a pass over the table that marks objects Done for longer
// than RefreshInterval as Refreshing, so Update repairs drift in the target.
// It runs in steps between rounds, paced by RefreshRateLimiter.
type refreshState[Obj any] struct {
	active  bool
	started bool
	last    Obj // the last object examined; the next step continues after it
}

// refreshScanLimit bounds the objects one refresh step examines, so a pass
// over a large table never stalls the loop.
const refreshScanLimit = 10000

func (l *loop[Obj]) stepRefresh(ctx context.Context, now time.Time, ts *loopTimers) {
	if !l.refresh.active || l.suspended() || ctx.Err() != nil {
		return
	}
	lim := l.cfg.RefreshRateLimiter
	allowed := l.cfg.RoundSize
	if lim.Limit() != rate.Inf {
		allowed = min(allowed, int(lim.TokensAt(now)))
		if allowed < 1 {
			ts.refresh.arm(tokenWait(lim, now))
			return
		}
	}

	cutoff := now.Add(-l.cfg.RefreshInterval)
	wtxn := l.db.WriteTxn(l.cfg.Table)
	defer wtxn.Abort()
	var objs func(func(Obj, statedb.Revision) bool)
	if l.refresh.started {
		objs = l.cfg.Table.LowerBound(wtxn, l.primary.QueryFromObject(l.refresh.last))
	} else {
		objs = l.cfg.Table.All(wtxn)
	}
	lastKey := ""
	if l.refresh.started {
		lastKey = l.keyOf(l.refresh.last)
	}
	marked, scanned, finished := 0, 0, true
	for obj, rev := range objs {
		if marked >= allowed || scanned >= refreshScanLimit {
			finished = false
			break
		}
		scanned++
		key := l.keyOf(obj)
		if key == lastKey {
			continue
		}
		l.refresh.last, l.refresh.started = obj, true
		if !l.refreshable(key, obj, cutoff) {
			continue
		}
		obj = l.cfg.SetObjectStatus(l.cfg.CloneObject(obj), Status{Kind: StatusKindRefreshing, UpdatedAt: now, ID: newStatusID()})
		if _, _, err := l.cfg.Table.CompareAndSwap(wtxn, rev, obj); err == nil {
			marked++
		}
	}
	if ctx.Err() != nil {
		return // stopping: write nothing
	}
	wtxn.Commit()
	if marked > 0 && lim.Limit() != rate.Inf {
		lim.AllowN(now, marked)
	}
	if finished {
		l.refresh = refreshState[Obj]{}
		return
	}
	// More to do: come back at once, or when the limiter has tokens.
	ts.refresh.arm(tokenWait(lim, now))
}

// refreshable reports whether obj is due for a refresh: Done for longer than
// RefreshInterval, or given up on (Error with no retry coming) for as long.
func (l *loop[Obj]) refreshable(key string, obj Obj, cutoff time.Time) bool {
	if _, busy := l.busy[key]; busy {
		return false
	}
	st := l.cfg.GetObjectStatus(obj)
	if !st.UpdatedAt.Before(cutoff) {
		return false
	}
	switch st.Kind {
	case StatusKindDone:
		return true
	case StatusKindError:
		_, retrying := l.retries.byKey[key]
		return !retrying
	}
	return false
}

// tokenWait is how long until lim has a whole token.
func tokenWait(lim *rate.Limiter, now time.Time) time.Duration {
	if lim.Limit() == rate.Inf {
		return 0
	}
	missing := 1 - lim.TokensAt(now)
	if missing <= 0 {
		return 0
	}
	if lim.Limit() <= 0 {
		return time.Hour // a zero limit never refreshes; look again later
	}
	return time.Duration(missing / float64(lim.Limit()) * float64(time.Second))
}
