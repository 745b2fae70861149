package reconciler

import (
	"time"

	"github.com/cilium/statedb"
)

// pull is the start of a round: it reads the changes since the last round,
// in revision order and deletes included, then the retries that are due,
// and queues at most RoundSize requests in all. It returns the watch
// channel that closes when there are further changes, and how many
// requests it queued: a round that queued none read only status writes
// (most often the reconciler's own) and does not count against the round
// limiter.
func (l *loop[Obj]) pull(now time.Time) (<-chan struct{}, int) {
	txn := l.db.ReadTxn()
	l.roundTxn, l.now = txn, now
	// Every write of the committer's this snapshot holds was published
	// before it was committed.
	l.committer.ownWrites(&l.ownWrites)
	budget := l.roundRoom()
	picked := 0
	seq, watch := l.changes.Next(txn)
	l.moreChanges = false
	// The iterator yields each object once, at its newest revision: a
	// request it carries may have been written at any revision after
	// what earlier rounds read, and the waits count it from there.
	askedAt := l.readTo + 1
	// A change the sequence yields is consumed, so stop right after the
	// one that used the last of the budget, never before handling one.
	for ch, rev := range seq {
		l.readTo = rev
		if l.onChange(change[Obj]{obj: ch.Object, rev: ch.Revision, deleted: ch.Deleted}, askedAt) {
			picked++
			if budget--; budget == 0 {
				l.moreChanges = true
				break
			}
		}
	}
	if !l.moreChanges && !l.readAll {
		// Everything there when the run began is read: deletes from
		// before the run left no change to read, and the table's
		// revision may be theirs. Later, the mark moves only with what
		// the iterator returns: statedb publishes a commit's data before
		// it closes the watch channels, and a read in that window returns
		// nothing although the snapshot holds the change.
		l.readAll = true
		l.readTo = max(l.readTo, l.startRev)
	}

	l.ownWrites.readPast(l.readTo) // also when the shortcuts kept has from being asked

	retries := l.breaker.AllowRetries(now, budget)
	for ; retries > 0; retries-- {
		r, ok := l.work.popDue(now)
		if !ok {
			break
		}
		if l.onRetry(txn, r, now) {
			picked++
		}
	}
	return watch, picked
}

// onChange decides what a change asks of this reconciler, and reports
// whether it queued a request. askedAt is the lowest revision at which
// the change can have been made.
func (l *loop[Obj]) onChange(ch change[Obj], askedAt statedb.Revision) bool {
	if l.cfg.Ownership != nil {
		return l.onOwnedChange(ch, askedAt)
	}
	return l.readChange(l.work, &l.ownWrites, &l.status, ch, askedAt, l.startRev, l.now)
}

// readChange decides what one change asks of this reconciler, for both
// loops, and reports whether it queued a request: a delete always does; a
// Done of the loop's own writing (own), or any status write while nothing
// waits, is a settled request's echo and asks nothing, without computing
// its key; anything else goes by decide.
func (r *reconciler[Obj]) readChange(w *work[Obj], own *revRanges, h *healthState, ch change[Obj], askedAt, startRev statedb.Revision, now time.Time) bool {
	if ch.deleted {
		key := r.keyOf(ch.obj)
		w.setUnset(key, false)
		w.add(key, ch, Status{}, askedAt, now)
		return true
	}
	st := r.cfg.GetObjectStatus(ch.obj)
	if r.checkShared(ch.obj, st) {
		h.dirty = true
	}
	// (An own write is never of an Unset key: it lands only while the
	// object holds the status the request read.)
	if st.Kind == StatusKindDone && (len(w.byKey) == 0 && len(w.unset) == 0 || own.has(ch.rev)) {
		return false
	}
	return w.decide(r.keyOf(ch.obj), ch, st, askedAt, startRev, now)
}

// decide makes a request of a live object's change if it asks this
// reconciler for work, and reports whether it queued one: the one rule by which
// both loops read changes. st is this reconciler's status in ch.obj. An
// Unset status asks nothing and withdraws what the key had outstanding.
func (w *work[Obj]) decide(key string, ch change[Obj], st Status, askedAt, startRev statedb.Revision, now time.Time) bool {
	r := w.byKey[key]
	live := r != nil && !r.deleted && r.state != stGone
	w.setUnset(key, st.Kind == StatusKindUnset)
	switch {
	case st.Kind == StatusKindUnset:
		// Asks nothing: whatever was outstanding for the key is
		// withdrawn, and an attempt still running has its result
		// discarded, as for a request replaced.
		if r != nil && r.state != stGone {
			w.settle(r)
		}
		return false
	case st.IsPendingOrRefreshing() || !st.Kind.Valid():
		if live && sameRequest(r.asked, st) {
			// The request we have, seen again in a newer revision:
			// another reconciler's status write on a shared object,
			// or another writer putting back a copy of the object from
			// before our last status write (statedb's reconciler does,
			// retrying): then the table holds what asked again, and
			// the result is written over that.
			r.obj, r.rev = ch.obj, ch.rev
			if !sameStatus(r.expect, st) {
				w.setExpect(r, st)
			}
			return false
		}
		w.add(key, ch, st, askedAt, now)
		return true
	case live && sameStatus(r.expect, st):
		// A status write that leaves ours as we know it (our own, or
		// another reconciler's on a shared object): follow the revision.
		r.obj, r.rev = ch.obj, ch.rev
	case r == nil && st.Kind == StatusKindError && ch.rev <= startRev:
		// Failed in an earlier run, whose retries are gone.
		// Its retry is due at once; it is not queued by this change.
		w.retryError(key, ch, st, askedAt, now)
	}
	// Otherwise a status write that asks nothing of us: a Done or Error
	// of ours read back after a newer one, or another writer's.
	return false
}

// onRetry queues a due retry, unless the object moved on meanwhile: then
// the change iterator delivers what supersedes it.
func (l *loop[Obj]) onRetry(txn statedb.ReadTxn, r *request[Obj], now time.Time) bool {
	cur, rev, found := l.cfg.Table.Get(txn, l.queryOf(r.obj))
	if r.deleted != !found {
		// Inserted again (for a failed delete) or deleted (for an
		// update): the change that did it is not read yet.
		l.work.settle(r)
		return false
	}
	if !r.deleted {
		if l.cfg.GetObjectStatus(cur).Kind == StatusKindUnset {
			// Made Unset, by a change the iterator has not returned
			// yet: withdrawn now, as reading it will.
			l.work.settle(r)
			return false
		}
		// Operate on the object as it is now: the status write that
		// moved its revision may have carried newer data.
		r.obj, r.rev = cur, rev
	}
	l.work.requeue(r, now)
	return true
}

// retryError makes a request of an object whose last attempt failed where
// no retry is kept for it (an earlier run, or another replica's
// ownership): it is retried at once, as if it had just failed.
func (w *work[Obj]) retryError(key string, ch change[Obj], st Status, askedAt statedb.Revision, now time.Time) {
	r := w.add(key, ch, Status{Kind: StatusKindPending, UpdatedAt: st.UpdatedAt}, askedAt, now)
	w.setExpect(r, st)
	r.attempts = 1
	w.setTried(r)
	w.retry(r, now, false, st.Error, now)
}

// setUnset records whether key's live object is Unset, for the counts.
func (w *work[Obj]) setUnset(key string, unset bool) {
	switch {
	case unset:
		if w.unset == nil {
			w.unset = map[string]struct{}{}
		}
		if _, ok := w.unset[key]; !ok {
			w.unset[key] = struct{}{}
			w.dirty = true
		}
	case len(w.unset) > 0:
		if _, ok := w.unset[key]; ok {
			delete(w.unset, key)
			w.dirty = true
		}
	}
}

// sameRequest reports whether st is the very request asked: a pending
// status with the same ID. A status without an ID (built by hand) is never
// taken for an older one: each revision carrying it is a request of its own.
func sameRequest(asked, st Status) bool {
	return st.ID != 0 && st.ID == asked.ID && st.Kind == asked.Kind
}

// sameStatus reports whether two statuses are the same write. A request
// without an ID is like no other, itself in a later revision included: a
// writer that sets a bare Pending again may have changed the data.
func sameStatus(a, b Status) bool {
	if a.ID == 0 && a.IsPendingOrRefreshing() {
		return false
	}
	return a.Kind == b.Kind && a.ID == b.ID && a.Error == b.Error && a.UpdatedAt.Equal(b.UpdatedAt)
}
