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
	// atEnd is set when the last step examined every object: then an
	// object written since (readTo >= from) is looked at without waiting
	// for at, for it may carry an old status (a restored or preloaded
	// Done object is due at once).
	atEnd bool
}

// refreshScanLimit bounds the objects one refresh step examines, so that
// a step never stalls the loop (objects skipped as not refreshable count
// too: a table of outstanding or unowned objects is walked in steps).
const refreshScanLimit = 10000

// dueObject is an object a step marks Refreshing.
type dueObject[Obj any] struct {
	key string
	obj Obj
	rev statedb.Revision
}

// stepRefresh marks what is due, up to what the rate limiter allows and
// RoundSize, and arms the refresh timer for the next step. It looks on a
// read snapshot and takes the table's write lock only to mark.
func (l *loop[Obj]) stepRefresh(ctx context.Context, now time.Time, ts *loopTimers) {
	if l.cfg.RefreshInterval == Off || l.suspended() || ctx.Err() != nil {
		return
	}
	written := l.refresh.atEnd && l.readTo >= l.refresh.from
	if now.Before(l.refresh.at) && !written {
		ts.refresh.ArmAt(l.refresh.at)
		return
	}
	lim := l.cfg.RefreshRateLimiter
	allowed := l.cfg.RoundSize
	if lim.Limit() != rate.Inf {
		allowed = min(allowed, int(lim.TokensAt(now)))
		if allowed < 1 {
			ts.refresh.ArmAt(tokenAt(lim, now))
			return
		}
	}
	due, next := l.findDue(l.db.ReadTxn(), now, allowed)
	if marked := l.markRefreshing(ctx, due, now); marked > 0 && lim.Limit() != rate.Inf {
		lim.AllowN(now, marked)
	}
	if next.IsZero() {
		next = tokenAt(lim, now) // more is due: go on when the limiter allows
	}
	l.refresh.at = next
	ts.refresh.ArmAt(next)
}

// findDue walks from where the last step stopped and returns up to allowed
// due objects to mark. next is when the first object not due yet will be,
// or zero when the step stopped with more due (or more to look at).
func (l *loop[Obj]) findDue(txn statedb.ReadTxn, now time.Time, allowed int) (due []dueObject[Obj], next time.Time) {
	cutoff := now.Add(-l.cfg.RefreshInterval)
	scanned := 0
	l.refresh.atEnd = false
	for obj, rev := range l.cfg.Table.LowerBound(txn, statedb.ByRevision[Obj](l.refresh.from)) {
		if len(due) >= allowed || scanned >= refreshScanLimit {
			return due, time.Time{}
		}
		st := l.cfg.GetObjectStatus(obj)
		if st.UpdatedAt.After(cutoff) {
			// Not due yet, nor, but for statuses written with an old
			// time, anything written after it. (Due is "at least
			// RefreshInterval old", so that next is after now: on a
			// clock that does not move while the loop runs, a synctest
			// bubble's, "due at now" would spin.)
			return due, st.UpdatedAt.Add(l.cfg.RefreshInterval)
		}
		scanned++
		l.refresh.from = rev + 1
		if key := l.keyOf(obj); l.refreshable(key, st) {
			due = append(due, dueObject[Obj]{key, obj, rev})
		}
	}
	// Nothing left to look at: an object written from now on is looked
	// at when it is read (atEnd), else after RefreshInterval.
	l.refresh.atEnd = true
	return due, now.Add(l.cfg.RefreshInterval)
}

// markRefreshing marks the due objects Refreshing in one write
// transaction; one that changed since it was found is left to its change.
// It returns how many it marked.
func (l *loop[Obj]) markRefreshing(ctx context.Context, due []dueObject[Obj], now time.Time) int {
	if len(due) == 0 {
		return 0
	}
	wtxn := l.db.WriteTxn(l.cfg.Table)
	defer wtxn.Abort()
	marked := 0
	for _, d := range due {
		if !l.ownsKey(d.key) {
			continue // the write rule: no status into another replica's key, asked in the transaction
		}
		clone, err := l.clone(d.obj)
		if err != nil {
			continue // reported when an operation's clone fails
		}
		obj := l.cfg.SetObjectStatus(clone, Status{Kind: StatusKindRefreshing, UpdatedAt: now, ID: newStatusID()})
		if _, _, err := l.cfg.Table.CompareAndSwap(wtxn, d.rev, obj); err == nil {
			marked++
		}
	}
	if ctx.Err() != nil {
		return 0 // stopping: write nothing
	}
	wtxn.Commit()
	return marked
}

// refreshable reports whether an object whose status is st, due by its
// age, is refreshed: Done, or given up on (Error with no retry coming),
// and not another replica's. An Unset object never is: it asks nothing.
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
