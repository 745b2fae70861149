package reconciler

import (
	"context"
	"time"

	"github.com/cilium/statedb"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/reconciler/internal/clock"
)

// Refresh marks an object Refreshing once it has been Done (or given up
// on) for RefreshInterval, so that Update repairs drift in the target. It
// runs on a timer of its own, whatever Prune does, paced by
// RefreshRateLimiter. What is due comes from two places, and an object
// skipped by one is always due in the other:
//
//   - Objects with no row in the request table, Done (or in Error with no
//     retry kept), come from a walk of the table in revision order, oldest
//     write first: a status write moves its object to the end of that
//     order, so the walk stops at the first object not due yet and every
//     one behind it is younger. The mark of how far it went only moves
//     forward, past objects it looked at; it skips the keys that have a
//     row, because the row brings them back.
//   - Rows bring them back: a given-up (Held) row is due RefreshInterval
//     after it was given up, and a row whose refresh could not be marked
//     when it was due (not owned at that moment) is RefreshDue, and due
//     again soon. Every other row ends in a status write, which puts its
//     object ahead of the walk again, or in NotOwned, which a gain
//     reconciles anyway.
//
// So a step costs what is due, never the table's size.

// refresher is where refresh stands.
type refresher[Obj comparable] struct {
	*reconciler[Obj]
	t    *requests[Obj]
	from statedb.Revision // the lowest revision the walk has not looked at
	at   time.Time        // when the walk goes on; zero: at once
	// atEnd is set when the walk looked at every object: then an object
	// written since (readTo >= from) is looked at without waiting for at,
	// for it may carry an old status (a restored Done object is due at
	// once).
	atEnd bool
}

// refreshScanLimit bounds the objects one step of the walk looks at, so
// that a step never stalls the loop.
const refreshScanLimit = 10000

// refreshRetry is how soon a refresh put off because the key was not owned
// at that moment is tried again (or RefreshInterval, if shorter).
const refreshRetry = time.Second

// dueObject is an object a step marks Refreshing, with the status it was
// found due in.
type dueObject[Obj any] struct {
	key string
	obj Obj
	rev statedb.Revision
	st  Status
}

// step marks what is due, up to what the rate limiter allows and
// RoundSize, and arms timer for the next step. It looks on a read
// snapshot and takes the table's write lock only to mark.
func (f *refresher[Obj]) step(ctx context.Context, now time.Time, readTo statedb.Revision, timer *clock.Timer) {
	if f.cfg.RefreshInterval == Off || f.suspended() || ctx.Err() != nil {
		return
	}
	rowAt, rowDue := f.nextRow()
	written := f.atEnd && readTo >= f.from
	if now.Before(f.at) && !written && (!rowDue || now.Before(rowAt)) {
		timer.ArmAt(f.nextAt(now))
		return
	}
	lim := f.cfg.RefreshRateLimiter
	allowed := f.cfg.RoundSize
	if lim.Limit() != rate.Inf {
		if allowed = min(allowed, int(lim.TokensAt(now))); allowed < 1 {
			timer.ArmAt(tokenAt(lim, now))
			return
		}
	}
	due := f.dueRows(now, allowed)
	if !now.Before(f.at) || written {
		due = f.walk(f.db.ReadTxn(), now, allowed-len(due), due)
	}
	if marked := f.mark(ctx, due, now); marked > 0 && lim.Limit() != rate.Inf {
		lim.AllowN(now, marked)
	}
	timer.ArmAt(f.nextAt(now))
}

// nextAt is when the next step is due: the walk's time or the earliest
// row's, once the limiter has a token.
func (f *refresher[Obj]) nextAt(now time.Time) time.Time {
	next := f.at
	if at, ok := f.nextRow(); ok && (next.IsZero() || at.Before(next)) {
		next = at
	}
	return later(later(next, now), tokenAt(f.cfg.RefreshRateLimiter, now))
}

// dueRows takes up to allowed rows whose refresh is due.
func (f *refresher[Obj]) dueRows(now time.Time, allowed int) []dueObject[Obj] {
	var due []dueObject[Obj]
	for len(due) < allowed {
		r, ok := f.popRow(now)
		if !ok {
			break
		}
		due = append(due, dueObject[Obj]{key: r.key, obj: r.obj, rev: r.rev, st: r.expect})
		f.unschedule(r, now) // marked, or put off again, below
	}
	return due
}

// walk goes on from where the last step stopped and adds up to allowed
// due objects without a row to due. It sets when the walk goes on next:
// when the first object not due yet will be, or at once when it stopped
// with more to look at.
func (f *refresher[Obj]) walk(txn statedb.ReadTxn, now time.Time, allowed int, due []dueObject[Obj]) []dueObject[Obj] {
	cutoff := now.Add(-f.cfg.RefreshInterval)
	scanned, found := 0, 0
	f.atEnd = false
	for obj, rev := range f.cfg.Table.LowerBound(txn, statedb.ByRevision[Obj](f.from)) {
		if found >= allowed || scanned >= refreshScanLimit {
			f.at = time.Time{}
			return due
		}
		st := f.cfg.GetObjectStatus(obj)
		if st.UpdatedAt.After(cutoff) {
			// Not due yet, nor (but for statuses written with an old
			// time) anything after it. Due is "at least RefreshInterval
			// old", so that the next step is after now: on a clock that
			// does not move while the loop runs, "due at now" would spin.
			f.at = st.UpdatedAt.Add(f.cfg.RefreshInterval)
			return due
		}
		scanned++
		f.from = rev + 1
		if key := f.keyOf(obj); f.refreshable(key, st) {
			due = append(due, dueObject[Obj]{key: key, obj: obj, rev: rev, st: st})
			found++
		}
	}
	f.atEnd = true
	f.at = now.Add(f.cfg.RefreshInterval)
	return due
}

// refreshable reports whether the walk refreshes an object whose status
// is st: Done, or failed with no retry kept, and no row to bring it back
// (Held, NotOwned, Unset and outstanding rows do; a Draining one only
// waits for an old attempt).
func (f *refresher[Obj]) refreshable(key string, st Status) bool {
	if r := f.t.rows[key]; r != nil && r.state != stDraining {
		return false
	}
	return st.Kind == StatusKindDone || st.Kind == StatusKindError
}

// mark marks the due objects Refreshing in one write transaction. One
// whose status changed since it was found is left to its change (another
// change, the status unchanged, is marked all the same); one whose key
// this replica does not own at this moment is put off (RefreshDue): it is
// not lost if ownership comes back without Changed ever firing. It
// returns how many it marked.
func (f *refresher[Obj]) mark(ctx context.Context, due []dueObject[Obj], now time.Time) int {
	if len(due) == 0 {
		return 0
	}
	wtxn := f.db.WriteTxn(f.cfg.Table)
	defer wtxn.Abort()
	marked := 0
	var putOff []dueObject[Obj]
	for _, d := range due {
		if !f.ownsKey(d.key) { // the write rule: asked in the transaction
			putOff = append(putOff, d)
			continue
		}
		cur, rev, found := f.cfg.Table.Get(wtxn, f.queryOf(d.obj))
		if !found || !sameStatus(f.cfg.GetObjectStatus(cur), d.st) {
			continue
		}
		clone, err := f.clone(cur)
		if err != nil {
			continue // reported when an operation's clone fails
		}
		if _, _, err := f.cfg.Table.CompareAndSwap(wtxn, rev, f.cfg.SetObjectStatus(clone, StatusRefreshing())); err == nil {
			marked++
		}
	}
	if ctx.Err() != nil {
		return 0 // stopping: write nothing
	}
	wtxn.Commit()
	for _, d := range putOff {
		f.later(d.key, change[Obj]{obj: d.obj, rev: d.rev}, now.Add(min(refreshRetry, f.cfg.RefreshInterval)), now)
	}
	return marked
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

// popRow returns the earliest Held or RefreshDue row refresh is due
// for at now; nextRefresh is when the earliest is due.
func (f *refresher[Obj]) popRow(now time.Time) (*request[Obj], bool) {
	t := f.t
	if t.refreshQ.Len() == 0 || t.refreshQ.Items[0].due.After(now) {
		return nil, false
	}
	return t.refreshQ.Items[0], true
}

func (f *refresher[Obj]) nextRow() (time.Time, bool) {
	t := f.t
	if t.refreshQ.Len() == 0 {
		return time.Time{}, false
	}
	return t.refreshQ.Items[0].due, true
}

// later keeps key, whose object (ch) was due for refresh but could
// not be marked now, due again at due: a key skipped is never lost.
func (f *refresher[Obj]) later(key string, ch change[Obj], due, now time.Time) {
	t := f.t
	r := t.rows[key]
	switch {
	case r != nil && r.state == stHeld:
		t.move(r, stHeld, r.why, r.err, due, now)
	case r != nil && r.state != stDraining:
		// Its row brings it back.
	default:
		r = t.add(key, ch, t.statusOf(ch.obj), ch.rev, now) // expects the status it was found due in
		t.move(r, stRefreshDue, whyNone, "", due, now)
	}
}

// unschedule takes r, whose refresh is due now, out of the refresh queue:
// a Held row stays given up on until the change refresh writes replaces
// it; a RefreshDue row is done with.
func (f *refresher[Obj]) unschedule(r *request[Obj], now time.Time) {
	t := f.t
	if r.state == stRefreshDue {
		t.settle(r)
		return
	}
	t.move(r, stHeld, r.why, r.err, time.Time{}, now)
}
