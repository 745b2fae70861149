package reconciler

import (
	"context"
	"unsafe"

	"github.com/cilium/statedb"
)

// The per-object loop's side of Ownership: keys this replica does not own
// are parked (their latest change kept, no request made), requests whose
// keys it stops owning are dropped and parked, and parked keys it comes to
// own are turned into requests at once.

// ownsKey reports whether this replica owns key (always, without
// Config.Ownership).
func (l *loop[Obj]) ownsKey(key string) bool {
	own := l.cfg.Ownership
	return own == nil || own.Owns(unsafe.Slice(unsafe.StringData(key), len(key)))
}

// park keeps key's latest change while this replica does not own it.
func (l *loop[Obj]) park(key string, ch change[Obj]) {
	if l.parked == nil {
		l.parked = map[string]change[Obj]{}
	}
	if old, ok := l.parked[key]; ok && !old.deleted {
		l.parkedLive--
	}
	if !ch.deleted {
		l.parkedLive++
	}
	l.parked[key] = ch
}

// unpark forgets key's parked change.
func (l *loop[Obj]) unpark(key string) {
	if old, ok := l.parked[key]; ok {
		if !old.deleted {
			l.parkedLive--
		}
		delete(l.parked, key)
	}
}

// disown parks a request's key: the request is dropped, its operation (if
// one runs) is no longer wanted and writes nothing.
func (l *loop[Obj]) disown(r *request[Obj]) {
	l.park(r.key, change[Obj]{obj: r.obj, rev: r.rev, deleted: r.deleted})
	l.work.settle(r)
}

// ownershipChanged looks at every parked key, every request and every
// object again: a walk of the table, but ownership changes are rare and
// an object Done here that another replica now owns must leave the counts.
func (l *loop[Obj]) ownershipChanged() {
	for key, ch := range l.parked {
		if l.ownsKey(key) {
			l.regain(key, ch, l.readTo+1)
		}
	}
	for key, r := range l.work.byKey {
		if r.state != stGone && !l.ownsKey(key) {
			l.disown(r)
		}
	}
	for obj, rev := range l.cfg.Table.All(l.db.ReadTxn()) {
		key := l.keyOf(obj)
		if _, parked := l.parked[key]; !parked && !l.ownsKey(key) {
			l.park(key, change[Obj]{obj: obj, rev: rev})
		}
	}
	l.work.dirty = true
}

// regain unparks a key that is owned now and makes a request of its
// latest change, whatever its status: a delete, a Pending or Refreshing
// object, an object whose last attempt here failed (it is retried at once),
// or one Done here before (applied again). It reports whether it queued
// the request for the next round (a retry is due at once instead).
func (l *loop[Obj]) regain(key string, ch change[Obj], askedAt statedb.Revision) bool {
	l.unpark(key)
	if ch.deleted {
		l.work.add(key, ch, Status{}, askedAt, l.now)
		return true
	}
	st := l.cfg.GetObjectStatus(ch.obj)
	switch {
	case st.IsPendingOrRefreshing() || !st.Kind.Valid():
		l.work.add(key, ch, st, askedAt, l.now)
	case st.Kind == StatusKindError:
		l.work.retryError(key, ch, st, askedAt, l.now)
		return false
	default:
		// Done by this replica under an earlier ownership: the owner
		// since may have changed the target. Applied again, as a refresh;
		// the write expects the Done that was read.
		r := l.work.add(key, ch, Status{Kind: StatusKindRefreshing, UpdatedAt: st.UpdatedAt}, askedAt, l.now)
		l.work.setExpect(r, st)
	}
	return true
}

// claim runs on the worker, right before an operation on key starts: it
// returns the context the operation runs under and the release to call
// once it has returned. ok is false when this replica no longer owns key:
// nothing starts. Claiming on the worker, not when the task is queued,
// means a replica holds claims only for operations that run: a task still
// queued (or dropped at Stop) holds none, so a handover never waits for
// it.
func (l *loop[Obj]) claim(ctx context.Context, key string) (context.Context, func(), bool) {
	own := l.cfg.Ownership
	if own == nil {
		return ctx, noRelease, true
	}
	return own.Acquire(ctx, unsafe.Slice(unsafe.StringData(key), len(key)))
}

// noRelease is claim's release without Config.Ownership. A package-level
// func: a literal in claim, a method of a generic type, is allocated on
// every call (it carries the type's dictionary).
var noRelease = func() {}
