package reconciler

import (
	"context"

	"github.com/cilium/statedb"
)

// WaitForReconciliation blocks until the table is initialized and no object
// in it is Pending, Refreshing or Error, or until ctx ends (then it returns
// ctx.Err()). An Unset object asks nothing and is not waited for.
// statusIndex is the table's status index for the reconciler of interest
// (index.NewStatusIndex).
//
// It is meant for tests and for start-up ordering ("do not serve until the
// routes are in"). It looks only at the first object of each non-Done kind
// and sleeps on the index's watch channels: no polling, no scans. Deletes
// leave no object behind to look at; use Reconciler.WaitUntilReconciled to
// wait for those.
func WaitForReconciliation[Obj any](ctx context.Context, db *statedb.DB, table statedb.Table[Obj], statusIndex statedb.Index[Obj, StatusKind]) error {
	notDone := [...]StatusKind{StatusKindPending, StatusKindRefreshing, StatusKindError}
	for {
		txn := db.ReadTxn()
		var watch <-chan struct{}
		if ok, w := table.Initialized(txn); !ok {
			watch = w
		} else {
			for _, kind := range notDone {
				objs, w := table.ListWatch(txn, statusIndex.Query(kind))
				if nonEmpty(objs) {
					watch = w
					break
				}
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

// nonEmpty reports whether seq yields at least one object.
func nonEmpty[Obj any](seq func(func(Obj, statedb.Revision) bool)) bool {
	for range seq {
		return true
	}
	return false
}
