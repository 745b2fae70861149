package waitorder

import (
	"context"
	"errors"
	"iter"
	"strconv"
	"sync"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	sdbindex "github.com/cilium/statedb/index"
	sdbrec "github.com/cilium/statedb/reconciler"
	"github.com/converge-go/converge/benchmarks/internal/bench"
	"golang.org/x/time/rate"
)

// statedbObject is the desired object of the statedb side.
type statedbObject struct {
	ID     uint64
	Value  uint64
	Status sdbrec.Status
}

func (o *statedbObject) clone() *statedbObject { c := *o; return &c }

func (o *statedbObject) TableHeader() []string { return []string{"ID", "Value", "Status"} }

func (o *statedbObject) TableRow() []string {
	return []string{strconv.FormatUint(o.ID, 10), strconv.FormatUint(o.Value, 10), o.Status.Kind.String()}
}

var (
	statedbIDs = idIndex(func(o *statedbObject) uint64 { return o.ID })
	// statedbStatus is the statedb side's status index: statedb (v0.9.4
	// too) ships none.
	statedbStatus = statedb.Index[*statedbObject, sdbrec.StatusKind]{
		Name:       "status",
		FromObject: func(o *statedbObject) sdbindex.KeySet { return sdbindex.NewKeySet(o.Status.Kind.Key()) },
		FromKey:    sdbrec.StatusKind.Key,
	}
)

// NewStatedb builds a System of cilium/statedb's reconciler, first in,
// first out: rounds of 1000 at most 1000 times a second, each round's
// Updates given to its BatchOperations, which run them Concurrency at a
// time (its own operations run one at a time; the batch gives it the
// same concurrency as the other sides). It has no ordering options and
// no operation timeout: a Setup that asks for either is an error.
func NewStatedb(ctx context.Context, s Setup) (System, error) {
	if !s.Order.IsZero() || s.OperationTimeout != 0 {
		return nil, errors.New("statedb's reconciler has no ordering options and no operation timeout")
	}
	sys := &tableSystem[*statedbObject]{
		ids:     statedbIDs,
		preload: s.Preload,
		pending: func(id uint64) *statedbObject {
			return &statedbObject{ID: id, Status: sdbrec.StatusPending()}
		},
		done: func(id uint64) *statedbObject {
			return &statedbObject{ID: id, Status: sdbrec.StatusDone()}
		},
		touched: func(o *statedbObject) *statedbObject {
			o = o.clone()
			o.Value++
			o.Status = sdbrec.StatusPending()
			return o
		},
		isDone: func(o *statedbObject) bool { return o.Status.Kind == sdbrec.StatusKindDone },
	}
	ops := statedbOps{t: s.Target, concurrency: max(s.Concurrency, 1)}
	sys.h = newHive(ctx, func(db *statedb.DB, p sdbrec.Params) error {
		table, err := statedb.NewTable(db, "bench-objects", statedbIDs, statedbStatus)
		if err != nil {
			return err
		}
		sys.db, sys.table = db, table
		_, err = sdbrec.Register(p, table,
			(*statedbObject).clone,
			func(o *statedbObject, st sdbrec.Status) *statedbObject { o.Status = st; return o },
			func(o *statedbObject) sdbrec.Status { return o.Status },
			ops, ops,
			sdbrec.WithRoundLimits(bench.RoundSize, rate.NewLimiter(bench.RoundRate, 1)),
			sdbrec.WithRetry(bench.RetryBackoffMin, bench.RetryBackoffMax),
			sdbrec.WithMetrics(statedbNopMetrics{}),
			sdbrec.WithoutPruning(),
			sdbrec.WithRefreshing(0, nil))
		return err
	})
	sys.waitAll = func(ctx context.Context) error {
		return waitNoneOf(ctx, sys.db, sys.table.ToTable(),
			statedbStatus.Query(sdbrec.StatusKindPending),
			statedbStatus.Query(sdbrec.StatusKindError))
	}
	return sys, sys.populate()
}

// statedbOps adapts the target to statedb's Operations and
// BatchOperations; a batch's Updates run concurrency at a time.
type statedbOps struct {
	t           *Target
	concurrency int
}

func (o statedbOps) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *statedbObject) error {
	return o.t.Update(ctx, obj.ID)
}

func (o statedbOps) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *statedbObject) error {
	return nil
}

func (o statedbOps) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*statedbObject, statedb.Revision]) error {
	return nil
}

func (o statedbOps) UpdateBatch(ctx context.Context, _ statedb.ReadTxn, batch []sdbrec.BatchEntry[*statedbObject]) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(o.concurrency, len(batch)) {
		wg.Go(func() {
			for i := range next {
				batch[i].Result = o.t.Update(ctx, batch[i].Object.ID)
			}
		})
	}
	for i := range batch {
		next <- i
	}
	close(next)
	wg.Wait()
}

func (o statedbOps) DeleteBatch(context.Context, statedb.ReadTxn, []sdbrec.BatchEntry[*statedbObject]) {
}

// statedbNopMetrics is a no-op implementation of statedb's Metrics, the
// counterpart of reconciler.NopMetrics.
type statedbNopMetrics struct{}

func (statedbNopMetrics) ReconciliationDuration(cell.FullModuleID, string, string, time.Duration) {}
func (statedbNopMetrics) ReconciliationErrors(cell.FullModuleID, string, int, int)                {}
func (statedbNopMetrics) PruneError(cell.FullModuleID, string, error)                             {}
func (statedbNopMetrics) PruneDuration(cell.FullModuleID, string, time.Duration)                  {}

// waitNoneOf blocks until none of the queries matches an object, sleeping
// on their watch channels: what reconciler.WaitForReconciliation does,
// for statedb's status index.
func waitNoneOf[Obj any](ctx context.Context, db *statedb.DB, table statedb.Table[Obj], queries ...statedb.Query[Obj]) error {
	for {
		txn := db.ReadTxn()
		var watch <-chan struct{}
		for _, q := range queries {
			objs, w := table.ListWatch(txn, q)
			for range objs {
				watch = w
				break
			}
			if watch != nil {
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

var (
	_ sdbrec.Operations[*statedbObject]      = statedbOps{}
	_ sdbrec.BatchOperations[*statedbObject] = statedbOps{}
	_ sdbrec.Metrics                         = statedbNopMetrics{}
)
