package reconciler_test

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	statedbindex "github.com/cilium/statedb/index"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/index"
	"github.com/converge-go/converge/reconciler"
)

// benchObject is the object of the round benchmarks: a key and a status.
type benchObject struct {
	ID     uint64
	Status reconciler.Status
}

func (o *benchObject) clone() *benchObject { c := *o; return &c }

func (*benchObject) TableHeader() []string { return []string{"ID", "Status"} }

func (o *benchObject) TableRow() []string {
	return []string{strconv.FormatUint(o.ID, 10), o.Status.Kind.String()}
}

var (
	benchIDIndex = statedb.Index[*benchObject, uint64]{
		Name:       "id",
		FromObject: func(o *benchObject) statedbindex.KeySet { return statedbindex.NewKeySet(statedbindex.Uint64(o.ID)) },
		FromKey:    statedbindex.Uint64,
		Unique:     true,
	}
	benchStatusIndex = index.NewStatusIndex("status", func(o *benchObject) reconciler.Status { return o.Status })
)

// benchOps is a target that accepts everything at once.
type benchOps struct{}

func (benchOps) Update(context.Context, statedb.ReadTxn, statedb.Revision, *benchObject) error {
	return nil
}

func (benchOps) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *benchObject) error {
	return nil
}

func (benchOps) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*benchObject, statedb.Revision]) error {
	return nil
}

// BenchmarkRound measures incremental reconciliation end to end: each
// iteration marks n objects Pending (in write transactions of 1000) and
// waits until the reconciler has made every one Done. The target does
// nothing, so this is the reconciler's own cost per object: reading the
// changes, handing the work to a worker, committing the status.
func BenchmarkRound(b *testing.B) {
	for _, n := range []int{1000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			var (
				db    *statedb.DB
				table statedb.RWTable[*benchObject]
			)
			h := hive.New(
				statedb.Cell,
				job.Cell,
				cell.Provide(cell.NewSimpleHealth),
				cell.Module("bench", "Benchmark",
					cell.Provide(job.Registry.NewGroup),
					cell.Invoke(func(db_ *statedb.DB, p reconciler.Params) (err error) {
						db = db_
						table, err = statedb.NewTable(db, "bench-objects", benchIDIndex, benchStatusIndex)
						if err != nil {
							return err
						}
						return reconciler.Register(reconciler.Config[*benchObject]{
							Table:                      table,
							GetObjectStatus:            func(o *benchObject) reconciler.Status { return o.Status },
							SetObjectStatus:            func(o *benchObject, s reconciler.Status) *benchObject { o.Status = s; return o },
							CloneObject:                (*benchObject).clone,
							Operations:                 benchOps{},
							RoundRateLimiter:           rate.NewLimiter(rate.Inf, 1),
							FullReconciliationInterval: reconciler.Off,
							RefreshInterval:            reconciler.Off,
							Metrics:                    reconciler.NopMetrics{},
						}, p)
					}),
				),
			)
			log := slog.New(slog.DiscardHandler)
			ctx := context.Background()
			if err := h.Start(log, ctx); err != nil {
				b.Fatal(err)
			}
			defer func() {
				if err := h.Stop(log, ctx); err != nil {
					b.Error(err)
				}
			}()

			b.ReportAllocs()
			for b.Loop() {
				for from := 0; from < n; from += 1000 {
					wtxn := db.WriteTxn(table)
					for id := from; id < min(from+1000, n); id++ {
						table.Insert(wtxn, &benchObject{ID: uint64(id), Status: reconciler.StatusPending()})
					}
					wtxn.Commit()
				}
				wctx, cancel := context.WithTimeout(ctx, time.Minute)
				err := reconciler.WaitForReconciliation(wctx, db, table.ToTable(), benchStatusIndex)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "objects/sec")
		})
	}
}
