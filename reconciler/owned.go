package reconciler

import (
	"context"
	"unsafe"

	"github.com/cilium/statedb"
)

// Ownership in the per-object loop's model of outstanding work. Whether
// this replica owns a key is decided here, and nowhere else: by onChange
// for each change read, by ownershipChanged for the whole table when
// Changed fires, by judge for a result, and, as the one rule for status
// writes, by writeStatus inside the write transaction.
//
// A key this replica does not own is no request. The model keeps only
// its primary key, in work.unowned, with the lowest revision a change of
// it may have been made at since this replica last held it: no object
// (the table holds it), and nothing at all for a key deleted meanwhile
// (its delete is its owner's work). When the key is gained, its request
// is built from the table as it is then and counts from that revision,
// so the waits wait for it.

// ownsKey reports whether this replica owns key (always, without
// Config.Ownership). It reads only the Config: the status writes ask it
// on the committer goroutine too.
func (r *reconciler[Obj]) ownsKey(key string) bool {
	own := r.cfg.Ownership
	return own == nil || own.Owns(keyBytes(key))
}

// lose takes key out of the outstanding work: this replica does not own
// it (any more). Its request, if any, is dropped (an attempt still
// executing keeps the key busy, and its result is not wanted); a live key
// is remembered as unowned from askedAt on, a deleted one is forgotten.
func (w *work[Obj]) lose(key string, deleted bool, askedAt statedb.Revision) {
	if r := w.byKey[key]; r != nil && r.state != stGone {
		w.settle(r)
	}
	w.setUnset(key, false) // counted as unowned, if live
	if deleted {
		delete(w.unowned, key)
		return
	}
	if w.unowned == nil {
		w.unowned = map[string]statedb.Revision{}
	}
	if at, ok := w.unowned[key]; !ok || askedAt < at {
		w.unowned[key] = askedAt
	}
	w.dirty = true
}

// gained reports whether key was unowned, and forgets that it was: the
// caller makes its request. askedAt is the lowest revision a change of it
// may have been made at while it was not owned.
func (w *work[Obj]) gained(key string) (askedAt statedb.Revision, ok bool) {
	askedAt, ok = w.unowned[key]
	if ok {
		delete(w.unowned, key)
		w.dirty = true
	}
	return askedAt, ok
}

// onOwnedChange is onChange with Config.Ownership: a change of a key not
// owned is dropped (lose), a change of a key gained makes its request
// (gain), any other is read as usual. It reports whether it queued a
// request.
func (l *loop[Obj]) onOwnedChange(ch change[Obj], askedAt statedb.Revision) bool {
	key := l.keyOf(ch.obj)
	if !l.ownsKey(key) {
		l.work.lose(key, ch.deleted, askedAt)
		return false
	}
	if at, ok := l.work.gained(key); ok {
		// Owned again, and read before Changed is: gained here, as
		// ownershipChanged would have, with this newer change.
		return l.gain(key, ch, min(at, askedAt))
	}
	return l.readChange(l.work, &l.ownWrites, &l.status, ch, askedAt, l.startRev, l.now)
}

// ownershipChanged looks at every request and every object again: a walk
// of the table, but ownership changes are rare, and an object Done here
// that another replica now owns must leave the counts.
func (l *loop[Obj]) ownershipChanged() {
	for key, r := range l.work.byKey {
		if r.state != stGone && !l.ownsKey(key) {
			l.work.lose(key, r.deleted, r.askedAt)
		}
	}
	for obj, rev := range l.cfg.Table.All(l.db.ReadTxn()) {
		key := l.keyOf(obj)
		if !l.ownsKey(key) {
			l.work.lose(key, false, rev)
		} else if at, ok := l.work.gained(key); ok {
			l.gain(key, change[Obj]{obj: obj, rev: rev}, min(at, rev))
		}
	}
	l.work.dirty = true
}

// gain makes a request of a key that is owned now, from its latest
// change, whatever its status but Unset (it asks nothing): a delete, a
// Pending or Refreshing object, an object whose last attempt failed (it
// is retried at once), or one Done before (applied again: the owner
// meanwhile may have changed the target). askedAt is where the waits
// count it from. It reports whether it queued the request for the next
// round (a retry is due at once instead).
func (l *loop[Obj]) gain(key string, ch change[Obj], askedAt statedb.Revision) bool {
	w, now := l.work, l.now
	if ch.deleted {
		w.add(key, ch, Status{}, askedAt, now)
		return true
	}
	st := l.cfg.GetObjectStatus(ch.obj)
	w.setUnset(key, st.Kind == StatusKindUnset)
	switch {
	case st.IsPendingOrRefreshing() || !st.Kind.Valid():
		w.add(key, ch, st, askedAt, now)
	case st.Kind == StatusKindError:
		w.retryError(key, ch, st, askedAt, now)
		return false
	case st.Kind == StatusKindUnset:
		return false // asks nothing, here as on any other replica
	default:
		// Applied again, as a refresh; the write expects the Done that
		// was read.
		r := w.add(key, ch, Status{Kind: StatusKindRefreshing, UpdatedAt: st.UpdatedAt}, askedAt, now)
		w.setExpect(r, st)
	}
	return true
}

// claim runs on the worker, right before an operation on key starts (key
// nil: a Prune, under the claim of the whole set): it returns the context
// the operation runs under and the release to call once it has returned.
// ok is false when this replica no longer owns key: nothing starts.
// Claiming on the worker, not when the task is queued, means a replica
// holds claims only for operations that run: a task still queued (or
// dropped at Stop) holds none, so a handover never waits for it.
func (l *loop[Obj]) claim(ctx context.Context, key []byte) (context.Context, func(), bool) {
	own := l.cfg.Ownership
	if own == nil {
		return ctx, noRelease, true
	}
	return own.Acquire(ctx, key)
}

// keyBytes is key's bytes, without a copy.
func keyBytes(key string) []byte { return unsafe.Slice(unsafe.StringData(key), len(key)) }

// noRelease is claim's release without Config.Ownership. A package-level
// func: a literal in claim, a method of a generic type, is allocated on
// every call (it carries the type's dictionary).
var noRelease = func() {}
