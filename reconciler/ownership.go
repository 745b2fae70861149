package reconciler

import "context"

// Ownership limits a reconciler to the keys this replica owns, for
// reconcilers that run as several replicas (leader-only, or sharded: see
// the etcd module's leader and shard packages). Set it as
// Config.Ownership.
//
// Keys this replica does not own are not outstanding work: they appear in
// no count of Status() (but Objects.Unowned), in no health report and in
// no wait, and this reconciler writes no status for them: a status write
// asks Owns inside its write transaction and lands only if the key is
// owned then. The reconciler keeps only their keys (no object), and
// forgets a key deleted while another replica owns it: that delete is the
// owner's work. When Changed says the owned set changed, the keys owned
// now are reconciled at once from the table as it is then, whatever their
// status: Pending or in Error elsewhere alike, and Done ones too (Done
// here under an earlier ownership: the owner since may have changed the
// target). A wait counts such a key from the first change of it read
// while it was not owned, and does not return while the loop has yet to
// look at a Changed that fired. An operation runs under the
// context Acquire returns, which the implementation cancels when
// ownership is in doubt.
//
// Prune is an operation like the others. Before each, the reconciler
// calls Acquire(ctx, nil), the claim of the whole set: ok == false means
// this replica prunes nothing now (not a failure; a replica that owns
// nothing never prunes). Otherwise Prune runs under the context returned,
// which carries the fencing token and is cancelled when the claim ends,
// and release is called once it has returned. It is given only the
// objects of the keys this replica owns (a key it has not read yet counts
// as owned), so a sharded target's Prune must still remove only what this
// replica owns of what it finds in the target. Refresh of the keys owned
// goes on whatever Prune does. A whole-set reconciler is leader-only: it
// syncs while Owns(nil) holds, under Acquire(ctx, nil), and each term it
// leads after another replica did begins at once with a Sync whose
// changes list every object, as a run's first Sync does. A key (or the
// lead) lost and owned again before the reconciler looks at Changed again
// looks to it like no change.
type Ownership interface {
	// Owns reports whether this replica owns the object with primary key
	// key now. It is called for every change the reconciler reads and
	// for every status write (inside the table's write transaction, on
	// the loop or its committer goroutine), so it must be cheap, must not
	// block and must be safe for concurrent use. key == nil asks about
	// the whole set (whole-set reconcilers).
	Owns(key []byte) bool

	// Acquire is called on the worker right before an operation on key
	// starts (never for one still queued, or dropped at Stop); key == nil
	// before a Prune or a Sync, for the claim of the whole set. It returns
	// a context derived from ctx that carries the fencing token for key
	// and is cancelled as soon as ownership of key is in doubt or lost,
	// and release, which the reconciler calls as soon as the operation has
	// returned (on the worker, before its result is committed). ok ==
	// false: not owned (for nil: this replica does not hold the whole
	// set's claim now), nothing starts, and that is no failure.
	Acquire(ctx context.Context, key []byte) (opCtx context.Context, release func(), ok bool)

	// Changed returns a channel that is closed at the next change of the
	// owned set; the reconciler then looks at the keys it holds again and
	// calls Changed for the next one.
	Changed() <-chan struct{}
}
