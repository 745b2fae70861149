package reconciler

import (
	"context"
	"iter"

	"github.com/cilium/statedb"
)

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

// Reconciler is a running reconciler for one table. New and Register return
// it; the work itself runs as a job of the module's job group.
type Reconciler[Obj any] interface {
	// TriggerFullReconciliation asks for a full reconciliation (Prune, then
	// refresh of stale objects; with SyncOperations, a Sync) as soon as the
	// table is initialized and the in-flight operations have finished. Calls made while one is already
	// requested are folded into it.
	TriggerFullReconciliation()

	// Suspend stops the reconciler from starting operations: operations in
	// flight finish and their results are committed, nothing new starts,
	// and health reports the reconciler as suspended. Changes made
	// meanwhile are all reconciled after Resume. Use it, with
	// Config.StartSuspended, to reconcile only while leading.
	Suspend()

	// Resume undoes Suspend. It does nothing when not suspended.
	Resume()

	// Status returns a snapshot of what the reconciler is doing: counts by
	// status, retries, operations in flight, the last round and full
	// reconciliation, and recent errors. It costs O(1).
	Status() StatusSnapshot

	// WaitUntilReconciled blocks until every change to the table up to rev
	// has been attempted at least once, or ctx ends (then it returns
	// ctx.Err()). It returns the revision up to which changes have been
	// attempted and the retry low watermark: the lowest revision of a change
	// that failed and waits for a retry, or reconciled+1 when nothing waits.
	// Everything up to rev reconciled successfully when reconciled >= rev
	// and retryLowWatermark > rev.
	WaitUntilReconciled(ctx context.Context, rev statedb.Revision) (reconciled, retryLowWatermark statedb.Revision, err error)

	// WaitUntilSettled blocks until every change up to rev has settled:
	// reconciled successfully, or given up on (a Permanent error, or
	// MaxRetries spent), with no retry pending for it. Deletes included.
	// It returns an error wrapping ctx.Err() if ctx ends first. Tests use
	// it after changing the table: table.Revision(db.ReadTxn()) is the
	// revision to wait for.
	WaitUntilSettled(ctx context.Context, rev statedb.Revision) error

	// Explain says where the object with primary key key stands for this
	// reconciler, and why it is not Done: its KeyState and since when,
	// the revision that asked, attempts, the last error, the next retry
	// or refresh and why. It answers as of the loop's latest step, asking
	// the loop; ctx bounds the wait for the answer. Before the hive has
	// started the loop, Explain waits for it; when ctx ends first, the
	// error wraps ErrNotRunning and ctx's error. After the loop stopped,
	// it returns an error wrapping ErrNotRunning at once.
	Explain(ctx context.Context, key []byte) (Explanation, error)
}
