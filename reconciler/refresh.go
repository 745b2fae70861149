package reconciler

import (
	"context"
	"time"

	"github.com/cilium/statedb"
	"golang.org/x/time/rate"
)

// Refresh marks an object Refreshing once it has been Done (or given up on
// in Error) for Config.RefreshInterval, so that Update repairs drift in the
// target. It runs on a schedule of its own, whatever Prune does: an object
// is refreshed within RefreshInterval and one round of its last status
// write, paced by RefreshRateLimiter.
//
// It walks the table in revision order, oldest write first. A status write
// moves its object to the end of that order, so revision order is
// UpdatedAt order for the objects this reconciler wrote: the walk stops at
// the first object not due yet and sleeps until it is, and every object
// behind it is younger. The mark of how far it went (refreshState.from)
// only moves forward; an object written again comes after it. So a step
// costs what is due, never the table's size.

// refreshState is how far the walk went and when it goes on.
type refreshState struct {
	from statedb.Revision // the lowest revision not examined yet
	at   time.Time        // when the next step is due; zero: at once
}

// refreshScanLimit bounds the objects one refresh step examines, so that
// a step never stalls the loop (objects skipped as not refreshable count
// too: a table of outstanding or unowned objects is walked in steps).
const refreshScanLimit = 10000

// stepRefresh marks what is due, up to what the rate limiter allows and
// RoundSize, and arms the refresh timer for the next step.
func (l *loop[Obj]) stepRefresh(ctx context.Context, now time.Time, ts *loopTimers) {
	if l.cfg.RefreshInterval == Off || l.suspended() || ctx.Err() != nil {
		return
	}
	if now.Before(l.refresh.at) {
		ts.refresh.armAt(l.refresh.at)
		return
	}
	lim := l.cfg.RefreshRateLimiter
	allowed := l.cfg.RoundSize
	if lim.Limit() != rate.Inf {
		allowed = min(allowed, int(lim.TokensAt(now)))
		if allowed < 1 {
			ts.refresh.armAt(tokenAt(lim, now))
			return
		}
	}
	wtxn := l.db.WriteTxn(l.cfg.Table)
	defer wtxn.Abort()
	marked, next := l.markDue(wtxn, now, allowed)
	if ctx.Err() != nil {
		return // stopping: write nothing
	}
	wtxn.Commit()
	if marked > 0 && lim.Limit() != rate.Inf {
		lim.AllowN(now, marked)
	}
	if next.IsZero() {
		next = tokenAt(lim, now) // more is due: go on when the limiter allows
	}
	l.refresh.at = next
	ts.refresh.armAt(next)
}

// markDue walks from where the last step stopped and marks up to allowed
// due objects Refreshing. next is when the first object not due yet will
// be, or zero when the step stopped with more due (or more to look at).
func (l *loop[Obj]) markDue(wtxn statedb.WriteTxn, now time.Time, allowed int) (marked int, next time.Time) {
	cutoff := now.Add(-l.cfg.RefreshInterval)
	scanned := 0
	for obj, rev := range l.cfg.Table.LowerBound(wtxn, statedb.ByRevision[Obj](l.refresh.from)) {
		if marked >= allowed || scanned >= refreshScanLimit {
			return marked, time.Time{}
		}
		st := l.cfg.GetObjectStatus(obj)
		if st.UpdatedAt.After(cutoff) {
			// Not due yet, nor anything written after it. (Due is
			// "at least RefreshInterval old", so that next is after
			// now: on a clock that does not move while the loop runs,
			// a synctest bubble's, "not due until now" would spin.)
			return marked, st.UpdatedAt.Add(l.cfg.RefreshInterval)
		}
		scanned++
		l.refresh.from = rev + 1
		key := l.keyOf(obj)
		if !l.refreshable(key, st) || !l.ownsKey(key) {
			continue // the write rule: no status into another replica's key
		}
		clone, err := l.clone(obj)
		if err != nil {
			continue // reported when an operation's clone fails
		}
		obj = l.cfg.SetObjectStatus(clone, Status{Kind: StatusKindRefreshing, UpdatedAt: now, ID: newStatusID()})
		if _, _, err := l.cfg.Table.CompareAndSwap(wtxn, rev, obj); err == nil {
			marked++
		}
	}
	// Nothing left to look at: whatever is written from now on is due
	// RefreshInterval after it, at the earliest.
	return marked, now.Add(l.cfg.RefreshInterval)
}

// refreshable reports whether an object whose status is st, due by its
// age, is refreshed: Done, or given up on (Error with no retry coming),
// and not another replica's.
func (l *loop[Obj]) refreshable(key string, st Status) bool {
	if r, ok := l.work.byKey[key]; ok && r.state != stHeld {
		return false // outstanding: it is being reconciled anyway
	}
	if _, unowned := l.work.unowned[key]; unowned {
		return false // another replica's work
	}
	return st.Kind == StatusKindDone || st.Kind == StatusKindError
}

// tokenAt is when lim has a whole token: now, or later.
func tokenAt(lim *rate.Limiter, now time.Time) time.Time {
	if lim.Limit() == rate.Inf {
		return now
	}
	missing := 1 - lim.TokensAt(now)
	if missing <= 0 {
		return now
	}
	if lim.Limit() <= 0 {
		return now.Add(time.Hour) // a zero limit never refreshes; look again later
	}
	return now.Add(time.Duration(missing / float64(lim.Limit()) * float64(time.Second)))
}
