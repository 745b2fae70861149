package reconciler

import "time"

// The whole-set executor's side of the outstanding work: a Sync takes
// every request at once, and its result comes back for all of them.

// takeAll hands every outstanding request to one Sync, under a new
// attempt id: queued and retrying requests run (they are in active),
// held ones stay held (given up on, but their change is in the Sync all
// the same). A request replaced while the Sync runs loses the id: the
// Sync's result is not its.
func (w *work[Obj]) takeAll(buf []*request[Obj], now time.Time) ([]*request[Obj], uint64) {
	w.lastAttempt++
	id := w.lastAttempt
	for _, r := range w.byKey {
		r.attempt = id
		if r.state == stQueued || r.state == stRetrying {
			errMsg, since := r.err, r.errAt
			w.leave(r)
			if r.tried {
				r.pickedAt = now
			}
			w.enter(r, stRunning, errMsg, since)
			r.startedAt, r.enteredAt = now, now
		}
		buf = append(buf, r)
	}
	return buf, id
}

// syncResult reports whether r's result is that of Sync id, and takes it.
func (w *work[Obj]) syncResult(r *request[Obj], id uint64) bool {
	if r.attempt != id {
		return false
	}
	r.attempt = 0
	return true
}

// untake queues r again as it was: the Sync it was in did not run for it
// (this replica stopped leading).
func (w *work[Obj]) untake(r *request[Obj]) {
	if r.state != stRunning {
		return
	}
	errMsg, since := r.err, r.errAt
	w.leave(r)
	w.enter(r, stQueued, errMsg, since)
}
