package main

import (
	"context"

	"github.com/cilium/statedb"
	sdbrec "github.com/cilium/statedb/reconciler"

	"github.com/converge-go/converge/reconciler"
)

// newTable creates the run's table: with its status index, or with the
// primary index alone for a bare run.
func newTable[Obj statedb.TableWritable, K any](db *statedb.DB, bare bool, ids statedb.Index[Obj, uint64], status statedb.Index[Obj, K]) (statedb.RWTable[Obj], error) {
	if bare {
		return statedb.NewTable(db, "bench-objects", ids)
	}
	return statedb.NewTable(db, "bench-objects", ids, status)
}

// waitLastDone returns a bare run's waitAll: until object last is Done,
// as statedb's own benchmark waits.
func (r *tableRig[Obj]) waitLastDone(last uint64) func(context.Context) error {
	return func(ctx context.Context) error { return r.waitObjectDone(ctx, int(last), 0) }
}

// convergeWaitAll returns a converge rig's waitAll: converge's own wait.
func convergeWaitAll(r *tableRig[*convergeObject]) func(context.Context) error {
	return func(ctx context.Context) error {
		return reconciler.WaitForReconciliation(ctx, r.db, r.table.ToTable(), convergeStatusIndex)
	}
}

// statedbWaitAll returns a statedb rig's waitAll: until no object is
// Pending, Refreshing or in Error.
func statedbWaitAll(r *tableRig[*statedbObject]) func(context.Context) error {
	return func(ctx context.Context) error {
		return waitNoneOf(ctx, r.db, r.table.ToTable(),
			statedbStatusIndex.Query(sdbrec.StatusKindPending),
			statedbStatusIndex.Query(sdbrec.StatusKindRefreshing),
			statedbStatusIndex.Query(sdbrec.StatusKindError))
	}
}

// waitNoneOf blocks until none of the queries matches an object, sleeping
// on their watch channels. It is what reconciler.WaitForReconciliation
// does, for statedb's status index: statedb (v0.9.4 too) has no such function.
func waitNoneOf[Obj any](ctx context.Context, db *statedb.DB, table statedb.Table[Obj], queries ...statedb.Query[Obj]) error {
	for {
		txn := db.ReadTxn()
		var watch <-chan struct{}
		for _, q := range queries {
			objs, w := table.ListWatch(txn, q)
			if nonEmpty(objs) {
				watch = w
				break
			}
		}
		if watch == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-watch:
		}
	}
}

func nonEmpty[Obj any](seq func(func(Obj, statedb.Revision) bool)) bool {
	for range seq {
		return true
	}
	return false
}
