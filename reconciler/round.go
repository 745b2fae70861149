package reconciler

import (
	"time"

	"github.com/cilium/statedb"
)

// pull is the start of a round: it reads the changes since the last round,
// in revision order and deletes included, then the retries that are due,
// and picks up at most budget() objects in all. It returns the watch
// channel that closes when there are further changes, and how many objects
// it picked up: a round that picked up none read only status writes (most
// often the reconciler's own) and does not count against the round limiter.
func (l *loop[Obj]) pull(now time.Time) (<-chan struct{}, int) {
	txn := l.db.ReadTxn()
	l.roundTxn = txn
	l.now = now
	budget := l.budget()
	picked := 0
	// Every change this round picks up was made after floor: what it
	// carries can be older than its revision (another reconciler's status
	// write moves the revision of our pending request), never older than
	// what earlier rounds read.
	floor := l.pulledTo
	seq, watch := l.changes.Next(txn)
	l.moreChanges = false
	// A change the sequence yields is consumed, so stop right after the
	// one that used the last of the budget, never before handling one.
	for ch, rev := range seq {
		l.pulledTo = rev
		if l.onChange(change[Obj]{obj: ch.Object, rev: ch.Revision, deleted: ch.Deleted}, floor) {
			picked++
			budget--
			if budget == 0 {
				l.moreChanges = true
				break
			}
		}
	}
	if !l.moreChanges {
		l.pulledTo = max(l.pulledTo, l.cfg.Table.Revision(txn))
	}

	retries := l.breaker.allowRetries(now, budget)
	for retries > 0 {
		e, ok := l.retries.popDue(now)
		if !ok {
			break
		}
		if l.onRetry(txn, e) {
			picked++
			retries--
		}
	}
	return watch, picked
}

// onChange decides what a change asks for, and reports whether it picked
// up work. floor is the revision up to which changes were read before the
// round that read this one.
func (l *loop[Obj]) onChange(ch change[Obj], floor statedb.Revision) bool {
	var st Status
	if !ch.deleted {
		st = l.cfg.GetObjectStatus(ch.obj)
		switch {
		case !st.Kind.Valid():
			// Not a kind we know: reconcile it rather than skip it silently.
		case st.Kind == StatusKindError && ch.rev <= l.startRev:
			// Failed in an earlier run (before a restart), whose retry
			// queue is gone: retry it as if it had just failed.
			key := l.keyOf(ch.obj)
			if _, busy := l.busy[key]; busy {
				return false
			}
			l.retries.remove(key)
			l.status.setFailing(key, st.Error, false, l.now)
			l.scheduleRetry(&item[Obj]{key: key, change: ch, origRev: floor + 1}, ch.rev, 1, false, l.now)
			return false
		case !st.IsPendingOrRefreshing():
			// A status write: ours (most changes we read are our own
			// writes, so this is checked before anything costlier), or
			// another reconciler's on a shared object. Nothing is asked
			// of us, and a retry stays scheduled.
			return false
		}
	}
	key := l.keyOf(ch.obj)
	if it, busy := l.busy[key]; busy {
		// Never two operations for one key at once: remember the newest
		// change and handle it when the busy item is committed.
		it.next, it.nextFloor, it.hasNext = ch, floor, true
		return false
	}
	// A new request (or a delete) replaces a scheduled retry: retries
	// follow the object, not the revision.
	l.retries.remove(key)
	it := l.newItem()
	it.key, it.change, it.floor, it.origRev, it.status = key, ch, floor, floor+1, st
	l.enqueue(it)
	return true
}

// unbusy frees an item's key.
func (l *loop[Obj]) unbusy(it *item[Obj]) {
	delete(l.busy, it.key)
	last := len(l.busyList) - 1
	moved := l.busyList[last]
	l.busyList[it.busyAt], moved.busyAt = moved, it.busyAt
	l.busyList[last] = nil
	l.busyList = l.busyList[:last]
}

// newItem returns a zeroed item, reused if one is free.
func (l *loop[Obj]) newItem() *item[Obj] {
	if n := len(l.free); n > 0 {
		it := l.free[n-1]
		l.free[n-1] = nil
		l.free = l.free[:n-1]
		return it
	}
	return new(item[Obj])
}

// release returns a committed item for reuse. Nothing may hold it: it is
// out of busy, and the worker that ran it has reported its result.
func (l *loop[Obj]) release(it *item[Obj]) {
	*it = item[Obj]{}
	if len(l.free) < l.cfg.RoundSize {
		l.free = append(l.free, it)
	}
}

// onRetry picks up a due retry, unless the object moved on meanwhile.
func (l *loop[Obj]) onRetry(txn statedb.ReadTxn, e *retryEntry[Obj]) bool {
	if _, busy := l.busy[e.key]; busy {
		return false // cannot happen: picking a key up clears its retry
	}
	cur, rev, found := l.cfg.Table.Get(txn, l.primary.QueryFromObject(e.obj))
	if e.deleted {
		if found {
			// Inserted again: the insert is (or will be) reconciled by
			// Update, which supersedes the failed delete.
			return false
		}
		it := l.newItem()
		it.key, it.change, it.origRev, it.failures = e.key, change[Obj]{obj: e.obj, rev: e.rev, deleted: true}, e.origRev, e.failures
		l.enqueue(it)
		return true
	}
	if !found {
		return false // deleted: the change iterator delivers the delete
	}
	it := l.newItem()
	it.key, it.change, it.origRev, it.failures = e.key, change[Obj]{obj: cur, rev: rev}, e.origRev, e.failures
	it.status = l.cfg.GetObjectStatus(cur)
	it.requestedAt = e.requestedAt
	l.enqueue(it)
	return true
}

func (l *loop[Obj]) enqueue(it *item[Obj]) {
	it.pickedAt = l.now
	l.busy[it.key] = it
	it.busyAt = len(l.busyList)
	l.busyList = append(l.busyList, it)
	l.ready = append(l.ready, it)
}
