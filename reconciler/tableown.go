package reconciler

import (
	"iter"
	"time"

	"github.com/cilium/statedb"
	"github.com/converge-go/converge/reconciler/internal/revs"
)

// The transitions Config.Ownership adds to the request table: a key
// another replica owns is lost (its work dropped, NotOwned), one owned
// again is gained (its request made from its latest change), as a change
// is read (readOwned) or when the owned set changes (reown).

// lose records that this replica does not own key (any more): its work is
// dropped (an attempt still executing keeps the key busy, its result not
// wanted); a live key is NotOwned from askedAt on, a deleted one
// forgotten, its delete being the owner's work.
func (t *requests[Obj]) lose(key string, deleted bool, askedAt statedb.Revision) {
	t.deleted.forget(key)
	if t.deps != nil {
		t.depGone(key, time.Now()) // another replica's target now
	}
	r := t.rows[key]
	switch {
	case r == nil && deleted:
		return
	case r == nil:
		r = t.row(key)
	case r.state == stNotOwned && !deleted:
		r.askedAt = min(r.askedAt, askedAt)
		return
	}
	if deleted {
		t.settle(r)
		return
	}
	t.bare(r, stNotOwned)
	r.askedAt = askedAt
}

// readOwned is read with Config.Ownership: a change of a key not owned is
// dropped (lose), a change of a key gained makes its request (gain), any
// other is read as usual.
func (t *requests[Obj]) readOwned(ch change[Obj], own *revs.Ranges, askedAt, startRev statedb.Revision, now time.Time) bool {
	key := t.keyOf(ch.obj)
	if !t.owns(key) {
		t.lose(key, ch.deleted, askedAt)
		return false
	}
	if at, ok := t.gained(key); ok {
		// Owned again, and read before Changed is: gained here, as reown
		// would, with this newer change.
		return t.gain(key, ch, min(at, askedAt), now)
	}
	return t.readChange(ch, own, askedAt, startRev, now)
}

// reown looks at every row and every object of all again when the owned
// set changed: a walk of the table, but ownership changes are rare, and
// an object Done here that another replica now owns must leave the counts.
func (t *requests[Obj]) reown(all iter.Seq2[Obj, statedb.Revision], now time.Time) {
	for key, r := range t.rows {
		if r.detail != nil && !t.owns(key) {
			t.lose(key, r.deleted, r.askedAt)
		}
	}
	for obj, rev := range all {
		key := t.keyOf(obj)
		if !t.owns(key) {
			t.lose(key, false, rev)
		} else if at, ok := t.gained(key); ok {
			t.gain(key, change[Obj]{obj: obj, rev: rev}, min(at, rev), now)
		}
	}
	t.dirty = true
}

// gain makes a request of a key that is owned now, from its latest
// change, whatever its status but Unset (it asks nothing): a delete, a
// Pending or Refreshing object, an object whose last attempt failed
// (retried at once), or one Done before (applied again: the owner
// meanwhile may have changed the target). askedAt is where the waits
// count it from. It reports whether it queued a request for the next
// round (a retry is due at once instead).
func (t *requests[Obj]) gain(key string, ch change[Obj], askedAt statedb.Revision, now time.Time) bool {
	if ch.deleted {
		t.seedDeleted(key, ch.obj) // the owner may have applied it
		t.add(key, ch, Status{}, askedAt, now)
		return true
	}
	st := t.statusOf(ch.obj)
	if t.deps != nil && st.Kind != StatusKindUnset {
		// What the target may hold of it (applied here before, or by the
		// owner meanwhile) is best known from its object, as at startup:
		// its dependencies' Deletes wait for it from now on, not from its
		// next attempt.
		t.seed(key, ch.obj)
	}
	switch {
	case st.Kind == StatusKindUnset:
		t.unset(key, true)
		return false // asks nothing, here as on any other replica
	case st.IsPendingOrRefreshing() || !st.Kind.Valid():
		t.add(key, ch, st, askedAt, now)
	case st.Kind == StatusKindError:
		t.retryError(key, ch, st, askedAt, now)
		return false
	default:
		// Applied again, as a refresh; the write expects the Done read.
		r := t.add(key, ch, Status{Kind: StatusKindRefreshing, UpdatedAt: st.UpdatedAt}, askedAt, now)
		t.setExpect(r, st)
		if t.deps != nil {
			// Done in the table while its refresh waits (depState): what
			// waited for it while another replica owned it goes on.
			t.release(key, now)
		}
	}
	return true
}

// gained reports whether key was NotOwned, and since which revision; its
// row is then the caller's to fill (add, retryError, unset).
func (t *requests[Obj]) gained(key string) (statedb.Revision, bool) {
	r := t.rows[key]
	if r == nil || r.state != stNotOwned {
		return 0, false
	}
	at := r.askedAt
	t.settle(r)
	return at, true
}
