package reconciler

import "time"

// The transitions of a request after an attempt: retried, held, or
// queued again; and the retry queue's head.

// retry schedules r's next attempt at due. A deferral (RetryAfter(d, nil))
// is not a failure: the status stays as it is.
func (w *work[Obj]) retry(r *request[Obj], due time.Time, deferred bool, errMsg string, now time.Time) {
	w.leave(r)
	r.due, r.deferred, r.enteredAt = due, deferred, now
	w.enterKeepingSince(r, stRetrying, errMsg, now)
}

// hold gives up on r until its object changes: it stays failing.
func (w *work[Obj]) hold(r *request[Obj], errMsg string, blocked bool, now time.Time) {
	w.leave(r)
	r.blocked, r.enteredAt = blocked, now
	w.enterKeepingSince(r, stHeld, errMsg, now)
}

// enterKeepingSince enters s; a failure keeps the time it began.
func (w *work[Obj]) enterKeepingSince(r *request[Obj], s reqState, errMsg string, now time.Time) {
	since := now
	if errMsg != "" && !r.errAt.IsZero() {
		since = r.errAt
	}
	w.enter(r, s, errMsg, since)
}

// setExpect records that the table now holds st as this reconciler's
// status of r's object.
func (w *work[Obj]) setExpect(r *request[Obj], st Status) {
	w.count(r, -1)
	r.expect = st
	w.count(r, +1)
	w.dirty = true
}

// requeue puts a due retry back into the queue.
func (w *work[Obj]) requeue(r *request[Obj], now time.Time) {
	errMsg, since := r.err, r.errAt
	w.leave(r)
	r.pickedAt, r.enteredAt = now, now
	w.enter(r, stQueued, errMsg, since)
	w.markReady(r)
}

// popDue returns the earliest retry if it is due at now.
func (w *work[Obj]) popDue(now time.Time) (*request[Obj], bool) {
	if len(w.byDue.items) == 0 || w.byDue.items[0].due.After(now) {
		return nil, false
	}
	return w.byDue.items[0], true
}

// nextDue is when the earliest retry is due.
func (w *work[Obj]) nextDue() (time.Time, bool) {
	if len(w.byDue.items) == 0 {
		return time.Time{}, false
	}
	return w.byDue.items[0].due, true
}
