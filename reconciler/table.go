package reconciler

import (
	"time"

	"github.com/cilium/statedb"
	"github.com/converge-go/converge/reconciler/internal/revs"
)

// The transitions of the request table, each named for what happened to
// a key (its rows, states, rules and bookkeeping are in request.go): a
// request made or settled, what a change read from the statedb table asks
// (read, decide; with Config.Ownership lose and gain, in tableown.go), a
// Sync taking every row, and what becomes of an attempt (returned,
// overdue, retry, hold).

// add makes a new request for key, replacing whatever its row held:
// retries follow the object, not the revision. An attempt still executing
// keeps the key busy; its result will not be wanted.
func (t *requests[Obj]) add(key string, ch change[Obj], st Status, askedAt statedb.Revision, now time.Time) *request[Obj] {
	return t.addTo(t.rows[key], key, ch, st, askedAt, now)
}

// addTo is add, given key's row (nil: none), looked up already.
func (t *requests[Obj]) addTo(r *request[Obj], key string, ch change[Obj], st Status, askedAt statedb.Revision, now time.Time) *request[Obj] {
	t.deleted.forget(key)
	cyclic := t.deps != nil && t.deps.isCyclic(key)
	if r == nil {
		r = t.newRow(key)
	}
	var logged string
	var loggedAt time.Time
	if r.detail != nil {
		logged, loggedAt = r.loggedErr, r.loggedAt
	}
	t.strip(r)
	if n := len(t.freeDets); n > 0 {
		r.detail, t.freeDets = t.freeDets[n-1], t.freeDets[:n-1]
	} else {
		r.detail = new(detail[Obj])
	}
	*r.detail = detail[Obj]{obj: ch.obj, rev: ch.rev, deleted: ch.deleted, asked: st, expect: st,
		pickedAt: now, loggedErr: logged, loggedAt: loggedAt}
	if !ch.deleted && st.Kind == StatusKindPending {
		r.requestedAt = st.UpdatedAt
	}
	r.askedAt = askedAt
	t.enter(r, t.queuedState(r), whyNone, now)
	if cyclic {
		t.forgetCycle(key, now) // a key of a cycle changed (its new row in place): the cycles are judged again
	}
	return r
}

// reread follows r's object to ch, the same request at a newer revision:
// what it names is asked again.
func (d *detail[Obj]) reread(ch change[Obj]) {
	d.obj, d.rev, d.deps, d.needs = ch.obj, ch.rev, nil, nil
}

// queuedState is Queued, Blocked while r waits for a dependency (or, a
// delete, for its dependents), or Busy while an attempt on r's key still
// runs.
func (t *requests[Obj]) queuedState(r *request[Obj]) reqState {
	return t.stateIf(r, t.deps != nil && t.gate(r))
}

// stateIf is Blocked when blocked, else Queued, or Busy while an attempt
// on r's key still runs.
func (t *requests[Obj]) stateIf(r *request[Obj], blocked bool) reqState {
	if blocked {
		return stBlocked
	}
	if r.running != 0 {
		return stBusy
	}
	return stQueued
}

// bare puts r, stripped, into NotOwned, Unset, or (with no state wanted)
// Draining while its attempt runs, else forgets it.
func (t *requests[Obj]) bare(r *request[Obj], s reqState) {
	t.strip(r)
	if s == reqStateCount && r.running != 0 {
		s = stDraining
	}
	if s != reqStateCount {
		t.enter(r, s, whyNone, time.Time{})
		return
	}
	delete(t.rows, r.key)
	// Reset, kept or not: a result in flight that points at it sees its
	// key gone (outcome).
	*r = request[Obj]{gen: r.gen + 1}
	if len(t.free) < 4096 {
		t.free = append(t.free, r)
	}
	t.dirty = true
}

// settle forgets r's work: nothing is outstanding for its key.
func (t *requests[Obj]) settle(r *request[Obj]) { t.bare(r, reqStateCount) }

// unset records whether key's live object is Unset. An Unset object asks
// nothing: whatever its key had outstanding is withdrawn, and an attempt
// still running has its result discarded.
func (t *requests[Obj]) unset(key string, unset bool) { t.unsetRow(t.rows[key], key, unset) }

// unsetRow is unset, given key's row (nil: none), and reports whether it
// settled the row (no longer Unset).
func (t *requests[Obj]) unsetRow(r *request[Obj], key string, unset bool) bool {
	switch {
	case unset && r == nil:
		t.bare(t.newRow(key), stUnset)
	case unset && r.state != stUnset:
		t.bare(r, stUnset)
	case !unset && r != nil && r.state == stUnset:
		t.settle(r)
		return true
	}
	return false
}

// read decides what one change asks of this reconciler, for both loops,
// and reports whether it queued a request. A delete always asks; a Done of
// the reconciler's own writing (own), or any status write while nothing
// is outstanding, is a settled request's echo and asks nothing, read
// without computing its key; anything else goes by decide.
func (t *requests[Obj]) read(ch change[Obj], own *revs.Ranges, askedAt, startRev statedb.Revision, now time.Time) bool {
	if t.owns != nil {
		return t.readOwned(ch, own, askedAt, startRev, now)
	}
	return t.readChange(ch, own, askedAt, startRev, now)
}

// readChange is read for a key owned here.
func (t *requests[Obj]) readChange(ch change[Obj], own *revs.Ranges, askedAt, startRev statedb.Revision, now time.Time) bool {
	if ch.deleted {
		key := t.keyOf(ch.obj)
		t.unset(key, false)
		t.add(key, ch, Status{}, askedAt, now)
		return true
	}
	st := t.statusOf(ch.obj)
	t.check(ch.obj, st)
	if (st.Kind == StatusKindDone || st.Kind == StatusKindError) && t.noticed != nil && !own.Has(ch.rev) {
		// Not this reconciler's write, yet its status is one only this
		// reconciler writes: a writer changed the object without
		// StatusPending() (the hook judges whether that is certain).
		t.noticed(ch.obj, ch.rev, st)
	}
	// (An own write is never of an Unset key: it lands only while the
	// object holds the status the request read.)
	if st.Kind == StatusKindDone && (len(t.rows) == 0 || own.Has(ch.rev)) {
		return false
	}
	return t.decide(t.keyOf(ch.obj), ch, st, askedAt, startRev, now)
}

// decide makes a request of a live object's change if it asks this
// reconciler for work, and reports whether it queued one. st is this
// reconciler's status in ch.obj.
func (t *requests[Obj]) decide(key string, ch change[Obj], st Status, askedAt, startRev statedb.Revision, now time.Time) bool {
	r := t.rows[key] // looked up once: the busiest path of a read
	if st.Kind == StatusKindUnset {
		t.unsetRow(r, key, true) // withdrawn
		return false
	}
	if t.unsetRow(r, key, false) {
		r = t.rows[key] // no longer Unset: gone, or Draining while an attempt runs
	}
	live := r != nil && r.detail != nil && !r.deleted && r.state != stRefreshDue
	switch {
	case st.IsPendingOrRefreshing() || !st.Kind.Valid():
		if live && sameRequest(r.asked, st) {
			// The request we have, seen again in a newer revision:
			// another reconciler's status write on a shared object, or
			// another writer putting back a copy of the object from
			// before our last status write. The result is written over
			// what asked again.
			r.reread(ch)
			if !sameStatus(r.expect, st) {
				t.setExpect(r, st)
			}
			return false
		}
		t.addTo(r, key, ch, st, askedAt, now)
		return true
	case live && sameStatus(r.expect, st):
		// A status write that leaves ours as we know it (our own, or
		// another reconciler's on a shared object): follow the revision.
		r.reread(ch)
	case r == nil && st.Kind == StatusKindError && ch.rev <= startRev:
		// Failed in an earlier run, whose retries are gone: retried at
		// once, not queued by this change.
		t.retryError(key, ch, st, askedAt, now)
	}
	// Otherwise a status write that asks nothing of us: a Done or Error of
	// ours read back after a newer one, or another writer's.
	return false
}

// retryError makes a request of an object whose last attempt failed where
// no retry is kept for it (an earlier run, or another replica's): it is
// retried at once, as if it had just failed.
func (t *requests[Obj]) retryError(key string, ch change[Obj], st Status, askedAt statedb.Revision, now time.Time) {
	r := t.add(key, ch, Status{Kind: StatusKindPending, UpdatedAt: st.UpdatedAt}, askedAt, now)
	t.setExpect(r, st)
	r.attempts = 1
	t.setTried(r)
	t.retry(r, now, whyBackoff, st.Error, now)
}

// takeAll hands every row with work to one Sync, under a new attempt id:
// Queued and Retrying rows run, Held ones stay Held (given up on, but
// their change is in the Sync all the same). A row replaced while the
// Sync runs loses the id: the Sync's result is not its.
func (t *requests[Obj]) takeAll(buf []*request[Obj], now time.Time) ([]*request[Obj], uint64) {
	t.lastAttempt++
	id := t.lastAttempt
	for _, r := range t.rows {
		if r.detail == nil {
			continue
		}
		r.attempt = id
		if r.state == stQueued || r.state == stRetrying {
			if r.tried {
				r.pickedAt = now
			}
			r.startedAt = now
			t.move(r, stRunning, whyNone, r.err, time.Time{}, now)
		}
		buf = append(buf, r)
	}
	return buf, id
}

// takeResult reports whether r awaits the result of attempt id (one
// object's, or a Sync's), and takes it: r awaits none after it.
func (t *requests[Obj]) takeResult(r *request[Obj], id uint64) bool {
	if r.detail == nil || r.attempt != id {
		return false
	}
	r.attempt = 0
	return true
}

// untake queues r again as it was: the Sync it was in did not run for it
// (this replica stopped leading).
func (t *requests[Obj]) untake(r *request[Obj]) {
	if r.state == stRunning {
		t.move(r, t.queuedState(r), whyNone, r.err, time.Time{}, r.since)
	}
}

// retry schedules r's next attempt at due.
func (t *requests[Obj]) retry(r *request[Obj], due time.Time, why reqWhy, errMsg string, now time.Time) {
	t.move(r, stRetrying, why, errMsg, due, now)
}

// hold gives up on r until its object changes, or until refreshAt (zero:
// never) when refresh tries it again. It stays failing.
func (t *requests[Obj]) hold(r *request[Obj], why reqWhy, errMsg string, refreshAt, now time.Time) {
	t.move(r, stHeld, why, errMsg, refreshAt, now)
}

// requeue puts r back into the queue: its retry came due, or it is to run
// again at once.
func (t *requests[Obj]) requeue(r *request[Obj], now time.Time) {
	r.pickedAt = now
	t.move(r, t.queuedState(r), whyNone, r.err, time.Time{}, now)
}

// returned records that attempt id on r's key stopped executing at now,
// and reports whether its result is still wanted.
func (t *requests[Obj]) returned(r *request[Obj], id uint64, now time.Time) bool {
	if id != 0 && r.running == id {
		r.running, r.stuck = 0, false
		t.executing--
		if t.order != nil {
			t.order.release(r)
		}
		switch r.state {
		case stBusy:
			// Its key is free now. Ordered mode's queue takes it as ready
			// from now; first in, first out, it waits on from its queuing.
			since, s := r.since, t.queuedState(r)
			if t.order != nil || s == stBlocked { // Blocked: a dependency changed meanwhile
				since = now
			}
			t.move(r, s, whyNone, r.err, time.Time{}, since)
		case stDraining:
			t.settle(r)
			return false
		}
	}
	return t.takeResult(r, id)
}

// overdue records that attempt id ran past its timeout: its result is
// given up on now, though it still runs. It reports whether the result
// was r's (the caller records the failure).
func (t *requests[Obj]) overdue(r *request[Obj], id uint64) bool {
	if id != 0 && r.running == id {
		r.stuck = true
	}
	return t.takeResult(r, id)
}

// writeOut records that r's result, of attempt id, is judged and its
// status write is out on the committer: it no longer takes room.
func (t *requests[Obj]) writeOut(r *request[Obj], id uint64, now time.Time) {
	t.move(r, stCommitting, whyNone, r.err, time.Time{}, now)
	r.writing = id
}

// failUnchanged makes requests of the objects a Sync failed that no row
// covered (the renderer rejects them now, though they asked for nothing)
// and that are still there and not Unset (get looks them up in the
// Sync's snapshot): each expects the status it has, to be written Error.
func (t *requests[Obj]) failUnchanged(failed map[string]ObjectFailure[Obj], get func(Obj) (Obj, statedb.Revision, bool), now time.Time) []*request[Obj] {
	var out []*request[Obj]
	for key, f := range failed {
		if t.rows[key] != nil {
			continue // a newer request covers it
		}
		obj, rev, found := get(f.Object)
		if !found || t.statusOf(obj).Kind == StatusKindUnset {
			continue // gone, or asks nothing: no status is written into it
		}
		r := t.add(key, change[Obj]{obj: obj, rev: rev}, Status{Kind: StatusKindPending}, rev, now)
		t.setExpect(r, t.statusOf(obj))
		out = append(out, r)
	}
	return out
}
