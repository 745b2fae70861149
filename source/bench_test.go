package source_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/sourcetest"
)

// BenchmarkInitialList measures an initial list of 1M items committed
// into the table (see benchmarks/ for the rows).
func BenchmarkInitialList(b *testing.B) {
	const n = 1_000_000
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

// oneSourceB builds (not starts) a hive with one source over st; the
// source is set once the hive starts.
func oneSourceB(b *testing.B, st *sourcetest.Store[string]) (*fixture, *source.Source) {
	src := new(source.Source)
	f := newFixture(b, func(f *fixture, p source.Params) (err error) {
		*src, err = source.New(storeConfig("s", f.table, st), p)
		return err
	})
	return f, src
}

// BenchmarkRelistUnchanged measures a relist of 1M unchanged items.
func BenchmarkRelistUnchanged(b *testing.B) {
	const n = 1_000_000
	st := sourcetest.NewStore[string]()
	for i := range n {
		st.Set(fmt.Sprintf("k%07d", i), "v")
	}
	st.Compact()
	f, srcp := oneSourceB(b, st)
	f.start(time.Minute)
	src := *srcp
	f.waitTable("list", func(txn statedb.ReadTxn) bool { init, _ := f.table.Initialized(txn); return init })
	for b.Loop() {
		before := src.Status().Relists
		began := time.Now()
		src.Resync()
		s := waitStatus(b, src, "relist", func(s source.StatusSnapshot) bool { return s.Relists > before })
		if s.LastRelist.Upserts != 0 {
			b.Fatalf("relist wrote %d", s.LastRelist.Upserts)
		}
		b.ReportMetric(time.Since(began).Seconds(), "s")
	}
}
