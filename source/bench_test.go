package source_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/sourcetest"
)

// BenchmarkInitialList measures an initial list of 100k items committed
// into the table (see benchmarks/ for the rows).
func BenchmarkInitialList(b *testing.B) {
	const n = 100_000
	st := sourcetest.NewStore[string]()
	for i := range n {
		st.Set(fmt.Sprintf("k%07d", i), "v")
	}
	for b.Loop() {
		f, _ := oneSourceB(b, st)
		began := time.Now()
		f.start(time.Minute)
		f.waitTable("list", func(txn statedb.ReadTxn) bool { init, _ := f.table.Initialized(txn); return init })
		b.ReportMetric(n/time.Since(began).Seconds(), "objects/sec")
	}
}

func oneSourceB(b *testing.B, st *sourcetest.Store[string]) (*fixture, source.Source) {
	var src source.Source
	f := newFixture(b, func(f *fixture, p source.Params) (err error) {
		src, err = source.New(storeConfig("s", f.table, st), p)
		return err
	})
	return f, src
}
