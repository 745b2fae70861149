package reconciler

import "context"

// Ownership limits a reconciler to the keys this replica owns, for
// reconcilers that run as several replicas (leader-only, or sharded: see
// the etcd module's leader and shard packages). Set it as
// Config.Ownership.
//
// Keys this replica does not own are not outstanding work: they appear in
// no count of Status() (but Objects.Unowned), in no health report and in
// no wait, and this reconciler writes no status for them. Their latest
// change is kept, so that when Changed says the owned set changed, the
// keys owned now are reconciled at once, whatever their status: Pending
// or in Error elsewhere alike, and Done ones too (Done here under an
// earlier ownership: the owner since may have changed the target). An operation runs under the context Acquire returns, which the
// implementation cancels when ownership is in doubt; its result is
// written only if the key is still owned at the commit.
//
// Prune is still given every desired object: a sharded target's Prune
// must remove only what this replica owns (ask Owns). A whole-set
// reconciler is leader-only: it syncs while Owns(nil) holds, and each term
// it leads after another replica did begins at once with a Sync whose
// changes list every object, as a run's first Sync does. A key (or the
// lead) lost and owned again before the reconciler looks at Changed again
// looks to it like no change.
type Ownership interface {
	// Owns reports whether this replica owns the object with primary key
	// key now. It is called for every change the reconciler reads, so it
	// must be cheap and must not block. key == nil asks about the whole
	// set (whole-set reconcilers).
	Owns(key []byte) bool

	// Acquire is called on the worker right before an operation on key
	// starts (never for one still queued, or dropped at Stop). It returns
	// a context derived from ctx that carries the fencing token for key
	// and is cancelled as soon as ownership of key is in doubt or lost,
	// and release, which the reconciler calls as soon as the operation has
	// returned (on the worker, before its result is committed). ok ==
	// false: not owned any more, nothing starts.
	Acquire(ctx context.Context, key []byte) (opCtx context.Context, release func(), ok bool)

	// Changed returns a channel that is closed at the next change of the
	// owned set; the reconciler then looks at the keys it holds again and
	// calls Changed for the next one.
	Changed() <-chan struct{}
}
