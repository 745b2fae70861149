package index_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/cilium/statedb"
	sdbindex "github.com/cilium/statedb/index"

	"github.com/converge-go/converge/index"
	"github.com/converge-go/converge/reconciler"
)

// benchObj is the object of the index benchmarks.
type benchObj struct {
	ID     uint64
	Status reconciler.Status
}

func (*benchObj) TableHeader() []string { return []string{"ID", "Status"} }

func (o *benchObj) TableRow() []string {
	return []string{strconv.FormatUint(o.ID, 10), o.Status.Kind.String()}
}

var (
	benchIDIndex = statedb.Index[*benchObj, uint64]{
		Name:       "id",
		FromObject: func(o *benchObj) sdbindex.KeySet { return sdbindex.NewKeySet(sdbindex.Uint64(o.ID)) },
		FromKey:    sdbindex.Uint64,
		Unique:     true,
	}
	benchStatusIndex = index.NewStatusIndex("", func(o *benchObj) reconciler.Status { return o.Status })
)

// benchTable returns a table of n objects, one in a hundred in Error and
// the rest Done: a large table with a few failures.
func benchTable(b *testing.B, n int) (*statedb.DB, statedb.RWTable[*benchObj]) {
	b.Helper()
	db := statedb.New()
	if err := db.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := db.Stop(); err != nil {
			b.Error(err)
		}
	})
	table, err := statedb.NewTable(db, "bench", benchIDIndex, benchStatusIndex)
	if err != nil {
		b.Fatal(err)
	}
	wtxn := db.WriteTxn(table)
	for i := range n {
		st := reconciler.StatusDone()
		if i%100 == 0 {
			st = reconciler.Status{Kind: reconciler.StatusKindError, Error: "failed"}
		}
		table.Insert(wtxn, &benchObj{ID: uint64(i), Status: st})
	}
	wtxn.Commit()
	return db, table
}

var benchSizes = []int{1000, 100_000, 1_000_000}

// BenchmarkStatusIndexNoneOf asks "is any object Pending, Refreshing or in
// Error?" the way reconciler.WaitForReconciliation does: the first object
// of each kind, with the watch channel. It must not depend on the table's
// size.
func BenchmarkStatusIndexNoneOf(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			db, table := benchTable(b, n)
			kinds := []reconciler.StatusKind{reconciler.StatusKindPending, reconciler.StatusKindRefreshing, reconciler.StatusKindError}
			b.ReportAllocs()
			for b.Loop() {
				txn := db.ReadTxn()
				found := false
				for _, k := range kinds {
					objs, _ := table.ListWatch(txn, benchStatusIndex.Query(k))
					for range objs {
						found = true
						break
					}
					if found {
						break
					}
				}
				if !found {
					b.Fatal("no object in Error")
				}
			}
		})
	}
}

// BenchmarkStatusIndexListErrors lists every object in Error (one in a
// hundred), as a "which objects failed?" query does.
func BenchmarkStatusIndexListErrors(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			db, table := benchTable(b, n)
			listed := 0
			b.ReportAllocs()
			for b.Loop() {
				for range table.List(db.ReadTxn(), benchStatusIndex.Query(reconciler.StatusKindError)) {
					listed++
				}
			}
			if want := (n + 99) / 100 * b.N; listed != want {
				b.Fatalf("listed %d objects, want %d", listed, want)
			}
			b.ReportMetric(float64(listed)/b.Elapsed().Seconds(), "objects/sec")
		})
	}
}

// BenchmarkStatusIndexUpdate changes the status of objects Done -> Pending
// -> Done in write transactions of 1000, the index maintenance every
// reconciler commit pays.
func BenchmarkStatusIndexUpdate(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			db, table := benchTable(b, n)
			pending, done := reconciler.StatusPending(), reconciler.StatusDone()
			next := 0
			b.ReportAllocs()
			for b.Loop() {
				wtxn := db.WriteTxn(table)
				for range 1000 {
					id := uint64(next % n)
					st := pending
					if (next/n)%2 == 1 {
						st = done
					}
					table.Insert(wtxn, &benchObj{ID: id, Status: st})
					next++
				}
				wtxn.Commit()
			}
			b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "objects/sec")
		})
	}
}
