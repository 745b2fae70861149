package reconciler

import (
	"context"
	"fmt"
	"iter"
	"strings"

	"github.com/cilium/statedb"
)

// What a user implements: the operations that make a target match the
// table (per object, in batches, or the whole set at once), and, for
// replicas, the ownership of keys.

// Operations make the target match one object at a time. They must be
// idempotent: the reconciler calls them again after failures, on refresh, and
// after restarts.
//
// Every operation gets a context that is cancelled when the reconciler stops
// or when Config.OperationTimeout passes, and a read transaction (a snapshot
// of the database taken when the work was picked up) for looking up related
// objects. An operation that panics fails only its own object: the panic is
// recovered, logged with its stack and turned into an error wrapping ErrPanic.
type Operations[Obj any] interface {
	// Update makes the target match obj. obj is a clone made with
	// Config.CloneObject, so Update may set fields on it (for example an ID
	// the target assigned); with a single reconciler per object those
	// changes are kept in the table together with the Done status.
	//
	// Return nil on success, an error to be retried with backoff,
	// Permanent(err) to stop retrying until the object changes, or
	// RetryAfter(d, err) to be retried after d.
	Update(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj Obj) error

	// Delete removes obj (already deleted from the table) from the target.
	// Deleting what is not there is not an error: return nil. Failures are
	// retried like Update's unless the key is inserted again meanwhile.
	Delete(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj Obj) error

	// Prune removes from the target everything that is not in objs, the full
	// desired set at txn. It is called during full reconciliation, only after
	// the table is initialized and never while an Update or Delete runs.
	// A failed Prune is reported (health, metrics) and tried again at the
	// next full reconciliation. With Config.Ownership it runs only under
	// the claim of the whole set (Ownership.Acquire(ctx, nil)), with that
	// claim's context, and objs holds only the objects of the keys this
	// replica owns: remove only what this replica owns of the rest.
	Prune(ctx context.Context, txn statedb.ReadTxn, objs iter.Seq2[Obj, statedb.Revision]) error
}

// BatchEntry is one object of a batch operation. The operation sets Result
// (nil on success) for each entry; entries it leaves alone count as
// succeeded.
type BatchEntry[Obj any] struct {
	Object   Obj
	Revision statedb.Revision
	Result   error
}

// BatchOperations, when set in Config, replace Operations.Update and
// Operations.Delete in incremental reconciliation: a round's updates go in
// one UpdateBatch call and its deletes in one DeleteBatch call. Use them
// when the target has a cheaper bulk API (netlink batches, BPF map batch
// ops, bulk REST calls). Retries of single objects still go through
// batches. Operations.Prune is still used for full reconciliation.
type BatchOperations[Obj any] interface {
	UpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []BatchEntry[Obj])
	DeleteBatch(ctx context.Context, txn statedb.ReadTxn, batch []BatchEntry[Obj])
}

// SyncOperations serve a whole-set target: one that takes the entire desired
// state at once, rendered from one snapshot and applied atomically (an
// nftables ruleset loaded with nft -f, iptables-restore, a config file that
// is reloaded, an xDS snapshot). Give them as Config.SyncOperations instead
// of Operations.
//
// Sync is never called while another Sync runs, and the first Sync of a run
// waits until the table is initialized: a partial desired set would remove
// real state.
type SyncOperations[Obj any] interface {
	// Sync makes the target equal to the whole desired set: every object in
	// desired, read from txn, and nothing else. changes are the objects
	// changed or deleted since the last successful Sync, in revision order,
	// for targets that can apply a difference; in the first Sync of a run
	// they hold every object, since nothing is known of what an earlier run
	// applied. Neither the objects nor txn may be kept or modified after
	// Sync returns.
	//
	// A nil error marks every object that was Pending, Refreshing or in
	// Error in txn Done. An error fails all of them, and the Sync is retried
	// with backoff (RetryAfter and Permanent apply as for Update). To fail
	// only some objects (an invalid object the renderer skipped), return
	// FailObjects: those objects alone are Error and retried, the others
	// are Done.
	Sync(ctx context.Context, txn statedb.ReadTxn, desired iter.Seq2[Obj, statedb.Revision], changes iter.Seq[Change[Obj]]) error
}

// Change is one object changed or deleted since the last successful Sync.
type Change[Obj any] struct {
	Object   Obj
	Revision statedb.Revision
	Deleted  bool
}

// ObjectFailure says why one object could not be applied. Err may be
// Permanent (not retried until the object changes) or RetryAfter.
type ObjectFailure[Obj any] struct {
	Object Obj
	Err    error
}

// FailObjects returns the error a Sync returns when it applied the whole
// set except the given objects: those are Error with their own message and
// retried, the rest are Done. It returns nil when failures is empty, so a
// renderer can return FailObjects(skipped...) unconditionally. Objects are
// matched by primary key; a nil Err counts as a failure with no message.
func FailObjects[Obj any](failures ...ObjectFailure[Obj]) error {
	if len(failures) == 0 {
		return nil
	}
	return &objectFailures[Obj]{failures: failures}
}

// objectFailures is FailObjects's error.
type objectFailures[Obj any] struct {
	failures []ObjectFailure[Obj]
}

func (e *objectFailures[Obj]) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d object(s) failed", len(e.failures))
	for i, f := range e.failures {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.failures)-i)
			break
		}
		fmt.Fprintf(&b, "; %v", f.Err)
	}
	return b.String()
}

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
