package reconciler

// The per-object executor's side of the outstanding work: queued requests
// handed to the workers once their key is free, attempts that returned or
// ran past their timeout, and status writes out on the committer and back.

// markReady lets a queued request be dispatched once its key is free.
func (w *work[Obj]) markReady(r *request[Obj]) {
	if w.dispatch && r.state == stQueued && r.running == 0 {
		r.gen++
		w.ready = append(w.ready, readyEntry[Obj]{r, r.gen})
	}
}

// takeReady returns the queued requests that may start now and marks
// them running, each with a new attempt id.
func (w *work[Obj]) takeReady(buf []*request[Obj]) []*request[Obj] {
	buf = buf[:0]
	for _, e := range w.ready {
		// The request may have been replaced, settled or queued again
		// since this entry was made.
		r := e.r
		if r.gen != e.gen || r.state != stQueued || r.running != 0 {
			continue
		}
		w.lastAttempt++
		r.attempt, r.running = w.lastAttempt, w.lastAttempt
		r.state = stRunning // stays in active: no count changes
		w.running++
		buf = append(buf, r)
	}
	clear(w.ready)
	w.ready = w.ready[:0]
	return buf
}

// returned records that attempt id of r stopped executing. It reports
// whether its result is still wanted.
func (w *work[Obj]) returned(r *request[Obj], id uint64) bool {
	if r.running == id {
		if r.state == stQueued {
			w.keyBusy-- // its key is free now: it takes room again
		}
		r.running, r.stuck = 0, false
		w.running--
		if r.state == stGone {
			w.forget(r)
		} else {
			w.markReady(r) // a newer request waited for the key
		}
	}
	if r.attempt != id {
		return false
	}
	r.attempt = 0
	return true
}

// overdue records that attempt id of r ran past its timeout: its result is
// given up on now (the caller records the failure), though it still runs.
func (w *work[Obj]) overdue(r *request[Obj], id uint64) bool {
	if r.running == id {
		r.stuck = true
	}
	if r.attempt != id {
		return false
	}
	r.attempt = 0
	return true
}

// writeOut records that r's result, of attempt id, is judged and its
// status write is out on the committer: r no longer takes room in a round.
func (w *work[Obj]) writeOut(r *request[Obj], id uint64) {
	errMsg, since := r.err, r.errAt
	w.leave(r)
	r.writing = id
	w.enter(r, stCommitting, errMsg, since)
}

// writeBack reports whether the status write of attempt id, back from the
// committer, is still r's: r was neither replaced nor settled meanwhile.
// The verdict then moves r on from stCommitting, as it would from
// stRunning.
func (w *work[Obj]) writeBack(r *request[Obj], id uint64) bool {
	return r.state == stCommitting && r.writing == id
}
