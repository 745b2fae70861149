package reconciler_test

import (
	"context"
	"iter"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// PrunesOK returns the number of successful prunes so far, and a channel
// that closes at the next one.
func (c *chaosOps) PrunesOK() (int, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.prunesOK, c.pruned
}

func (c *chaosOps) Update(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	return c.do(ctx, opUpdate, obj.ID, chaosVersion(obj), func(ctx context.Context) error {
		return c.inner.Update(ctx, txn, rev, obj)
	})
}

func (c *chaosOps) Delete(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	return c.do(ctx, opDelete, obj.ID, chaosVersion(obj), func(ctx context.Context) error {
		return c.inner.Delete(ctx, txn, rev, obj)
	})
}

func (c *chaosOps) Prune(ctx context.Context, txn statedb.ReadTxn, objs iter.Seq2[*testObject, statedb.Revision]) error {
	return c.do(ctx, opPrune, "prune", 0, func(ctx context.Context) error {
		return c.inner.Prune(ctx, txn, objs)
	})
}

// UpdateBatch and DeleteBatch run the entries one by one, each with its own
// fault: a panic fails the rest of the batch, and a hang uses up the
// batch's timeout.
func (c *chaosOps) UpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*testObject]) {
	c.stats.ops[opUpdateBatch].Add(1)
	c.checkStart(ctx, opUpdateBatch, "", true)
	eachEntry(context.WithValue(ctx, inBatchKey{}, true), txn, batch, c.Update)
}

func (c *chaosOps) DeleteBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*testObject]) {
	c.stats.ops[opDeleteBatch].Add(1)
	c.checkStart(ctx, opDeleteBatch, "", true)
	eachEntry(context.WithValue(ctx, inBatchKey{}, true), txn, batch, c.Delete)
}
