package leader

import (
	"context"
	"iter"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// Operations wraps ops so that each call runs under the elector: it starts
// only while leading, with a context that carries the term's fencing token
// and is cancelled when the term ends. It is how leader-only reconciliation
// works for a reconciler whose Config.Ownership is not set (prefer setting
// it to the Elector): Govern suspends the reconciler, and this cancels what
// was in flight.
//
// A call made after the term ended fails with ErrNotLeader wrapped in
// reconciler.RetryAfter(RetryInterval): the engine keeps the object as
// outstanding work, suspended, and retries it soon after the next term
// starts.
func Operations[Obj any](e *Elector, ops reconciler.Operations[Obj]) reconciler.Operations[Obj] {
	return &fencedOps[Obj]{e: e, ops: ops}
}

type fencedOps[Obj any] struct {
	e   *Elector
	ops reconciler.Operations[Obj]
}

func (f *fencedOps[Obj]) run(ctx context.Context, op func(context.Context) error) error {
	opCtx, release, ok := f.e.Acquire(ctx, nil)
	if !ok {
		return reconciler.RetryAfter(f.e.cfg.RetryInterval, ErrNotLeader)
	}
	defer release()
	return op(opCtx)
}

// Update runs the wrapped Update under the current term.
func (f *fencedOps[Obj]) Update(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj Obj) error {
	return f.run(ctx, func(ctx context.Context) error { return f.ops.Update(ctx, txn, rev, obj) })
}

// Delete runs the wrapped Delete under the current term.
func (f *fencedOps[Obj]) Delete(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj Obj) error {
	return f.run(ctx, func(ctx context.Context) error { return f.ops.Delete(ctx, txn, rev, obj) })
}

// Prune runs the wrapped Prune under the current term: whole-set work is
// leader-only.
func (f *fencedOps[Obj]) Prune(ctx context.Context, txn statedb.ReadTxn, objs iter.Seq2[Obj, statedb.Revision]) error {
	return f.run(ctx, func(ctx context.Context) error { return f.ops.Prune(ctx, txn, objs) })
}
