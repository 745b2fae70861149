package waitorder

import (
	"context"
	"iter"
	"strconv"

	"github.com/cilium/statedb"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/benchmarks/internal/bench"
	"github.com/converge-go/converge/index"
	"github.com/converge-go/converge/reconciler"
)

// convergeObject is the desired object of the converge side.
type convergeObject struct {
	ID     uint64
	Value  uint64
	Status reconciler.Status
}

func (o *convergeObject) clone() *convergeObject { c := *o; return &c }

func (o *convergeObject) TableHeader() []string { return []string{"ID", "Value", "Status"} }

func (o *convergeObject) TableRow() []string {
	return []string{strconv.FormatUint(o.ID, 10), strconv.FormatUint(o.Value, 10), o.Status.Kind.String()}
}

var (
	convergeIDs    = idIndex(func(o *convergeObject) uint64 { return o.ID })
	convergeStatus = index.NewStatusIndex("status", func(o *convergeObject) reconciler.Status { return o.Status })
)

// NewConverge builds a System of converge's reconciler: Concurrency
// workers, rounds of 1000 at most 1000 times a second, the Setup's
// operation timeout and order, no refresh, no pruning, no metrics.
func NewConverge(ctx context.Context, s Setup) (System, error) {
	sys := &tableSystem[*convergeObject]{
		ids:     convergeIDs,
		preload: s.Preload,
		pending: func(id uint64) *convergeObject {
			return &convergeObject{ID: id, Status: reconciler.StatusPending()}
		},
		done: func(id uint64) *convergeObject {
			return &convergeObject{ID: id, Status: reconciler.StatusDone()}
		},
		touched: func(o *convergeObject) *convergeObject {
			o = o.clone()
			o.Value++
			o.Status = reconciler.StatusPending()
			return o
		},
		isDone: func(o *convergeObject) bool { return o.Status.Kind == reconciler.StatusKindDone },
	}
	sys.h = newHive(ctx, func(db *statedb.DB, p reconciler.Params) error {
		table, err := statedb.NewTable(db, "bench-objects", convergeIDs, convergeStatus)
		if err != nil {
			return err
		}
		sys.db, sys.table = db, table
		_, err = reconciler.New(convergeConfig(table, s), p)
		return err
	})
	sys.waitAll = func(ctx context.Context) error {
		return reconciler.WaitForReconciliation(ctx, sys.db, sys.table.ToTable(), convergeStatus)
	}
	return sys, sys.populate()
}

// convergeConfig is the reconciler's Config for s.
func convergeConfig(table statedb.RWTable[*convergeObject], s Setup) reconciler.Config[*convergeObject] {
	cfg := reconciler.Config[*convergeObject]{
		Table:                      table,
		GetObjectStatus:            func(o *convergeObject) reconciler.Status { return o.Status },
		SetObjectStatus:            func(o *convergeObject, st reconciler.Status) *convergeObject { o.Status = st; return o },
		CloneObject:                (*convergeObject).clone,
		Operations:                 convergeOps{t: s.Target},
		RoundSize:                  bench.RoundSize,
		RoundRateLimiter:           rate.NewLimiter(bench.RoundRate, 1),
		Concurrency:                max(s.Concurrency, 1),
		OperationTimeout:           s.OperationTimeout,
		RetryBackoffMin:            bench.RetryBackoffMin,
		RetryBackoffMax:            bench.RetryBackoffMax,
		FullReconciliationInterval: reconciler.Off,
		RefreshInterval:            reconciler.Off,
		Metrics:                    reconciler.NopMetrics{},
	}
	applyOrder(&cfg, s.Order)
	return cfg
}

// convergeOps adapts the target to converge's Operations.
type convergeOps struct{ t *Target }

func (o convergeOps) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *convergeObject) error {
	return o.t.Update(ctx, obj.ID)
}

func (o convergeOps) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *convergeObject) error {
	return nil
}

func (o convergeOps) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*convergeObject, statedb.Revision]) error {
	return nil
}
