package convergeotel_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	convergeotel "github.com/converge-go/converge/otel"
	"github.com/converge-go/converge/reconciler"
)

// The benchmarks of the adapter's cost, each mode side by side in one
// run (benchmarks/README.md has the command and the results): noop-1m's
// shape (a bulk load of Pending objects, a target that does nothing,
// the default Config) with no observer, the adapter with a sampler that
// samples nothing (the SDK's, or the adapter's head sampler), with the
// API's no-op provider (no SDK installed), sampling one attempt in 100
// with the head sampler, and everything, into an in-memory exporter; and
// the isolated-change latency with the adapter off and on.

// benchModes are the observers of each mode.
// benchMode is a mode's name and its observers.
type benchMode struct {
	name string
	obs  func() []reconciler.Observer
}

func benchModes(b *testing.B) []benchMode {
	never := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	b.Cleanup(func() { _ = never.Shutdown(context.Background()) })
	return []benchMode{
		{"off", func() []reconciler.Observer { return nil }},
		{"otel-noop", func() []reconciler.Observer {
			// No SDK installed: the API's no-op provider, as the example
			// runs without --otlp-endpoint.
			return []reconciler.Observer{convergeotel.New(convergeotel.Options{TracerProvider: noop.NewTracerProvider()})}
		}},
		{"otel-never", func() []reconciler.Observer {
			return []reconciler.Observer{convergeotel.New(convergeotel.Options{TracerProvider: never})}
		}},
		{"otel-head-never", func() []reconciler.Observer {
			// The adapter's head sampler declines every attempt: the
			// engine builds no event, the SDK starts no span.
			return []reconciler.Observer{convergeotel.New(convergeotel.Options{TracerProvider: never,
				Sample: func(reconciler.Attempt) bool { return false }})}
		}},
		{"otel-head-1in100-memory", func() []reconciler.Observer {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			return []reconciler.Observer{convergeotel.New(convergeotel.Options{TracerProvider: tp, Sample: convergeotel.OneIn(100)})}
		}},
		{"otel-always-memory", func() []reconciler.Observer {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			return []reconciler.Observer{convergeotel.New(convergeotel.Options{TracerProvider: tp})}
		}},
	}
}

// rig is a hive with a table and a reconciler of the default Config
// whose target does nothing.
type rig struct {
	h     *hive.Hive
	db    *statedb.DB
	table statedb.RWTable[*item]
	r     reconciler.Reconciler[*item]
}

func startRig(b *testing.B, obs []reconciler.Observer) *rig {
	g := &rig{}
	g.h = hive.New(
		statedb.Cell, job.Cell, reconciler.Cell,
		cell.Provide(cell.NewSimpleHealth),
		cell.Module("bench", "Benchmark",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db *statedb.DB, p reconciler.Params) (err error) {
				g.db = db
				if g.table, err = statedb.NewTable(db, "items", itemByID); err != nil {
					return err
				}
				g.r, err = reconciler.New(reconciler.Config[*item]{
					Table:           g.table,
					GetObjectStatus: func(o *item) reconciler.Status { return o.Status },
					SetObjectStatus: func(o *item, s reconciler.Status) *item { o.Status = s; return o },
					CloneObject:     (*item).clone,
					Operations:      &target{},
					Observers:       obs,
				}, p)
				return err
			}),
		),
	)
	if err := g.h.Start(slog.New(slog.DiscardHandler), context.Background()); err != nil {
		b.Fatal(err)
	}
	return g
}

func (g *rig) stop(b *testing.B) {
	if err := g.h.Stop(slog.New(slog.DiscardHandler), context.Background()); err != nil {
		b.Fatal(err)
	}
}

// write inserts objects ids [from, to) Pending, in transactions of 1000,
// and returns the revision of the last.
func (g *rig) write(ids []string) statedb.Revision {
	for len(ids) > 0 {
		n := min(len(ids), 1000)
		wtxn := g.db.WriteTxn(g.table)
		for _, id := range ids[:n] {
			if _, _, err := g.table.Insert(wtxn, &item{ID: id, Status: reconciler.StatusPending()}); err != nil {
				panic(err)
			}
		}
		wtxn.Commit()
		ids = ids[n:]
	}
	return g.table.Revision(g.db.ReadTxn())
}

// noopObjects is noop-1m's size: CONVERGE_NOOP_OBJECTS, else a million.
func noopObjects() int {
	if n, err := strconv.Atoi(os.Getenv("CONVERGE_NOOP_OBJECTS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// BenchmarkNoop1M reconciles a bulk load with each mode; run with
// -benchtime 1x -count N for N interleaved rounds of the modes.
func BenchmarkNoop1M(b *testing.B) {
	ids := make([]string, noopObjects())
	for i := range ids {
		ids[i] = fmt.Sprintf("%08d", i)
	}
	for _, mode := range benchModes(b) {
		b.Run(mode.name, func(b *testing.B) {
			var objects int
			var elapsed, cpu time.Duration
			for b.Loop() {
				g := startRig(b, mode.obs())
				runtime.GC()
				start, cpu0 := time.Now(), cpuTime()
				rev := g.write(ids)
				if err := g.r.WaitUntilSettled(context.Background(), rev); err != nil {
					b.Fatal(err)
				}
				elapsed += time.Since(start)
				cpu += cpuTime() - cpu0
				objects += len(ids)
				b.StopTimer()
				g.stop(b)
				b.StartTimer()
			}
			b.ReportMetric(float64(objects)/elapsed.Seconds(), "objects/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(objects), "cpu-µs/object")
		})
	}
}

// BenchmarkIsolatedChange measures the latency of one change at a time
// over a table of 1000 Done objects, from the write to the wait
// returning: its p50 and p99 over 1000 samples, 2ms apart (pacing, as the
// core harness's latency/isolated does, so that each change finds the
// reconciler idle and its round limiter full).
func BenchmarkIsolatedChange(b *testing.B) {
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("%08d", i)
	}
	for _, mode := range slices.DeleteFunc(benchModes(b), func(m benchMode) bool { return m.name == "otel-always-memory" }) {
		b.Run(mode.name, func(b *testing.B) {
			g := startRig(b, mode.obs())
			defer g.stop(b)
			if err := g.r.WaitUntilSettled(context.Background(), g.write(ids)); err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			var lat []time.Duration
			for b.Loop() {
				for i := range 1000 {
					time.Sleep(2 * time.Millisecond)
					start := time.Now()
					rev := g.write(ids[i : i+1])
					if err := g.r.WaitUntilSettled(context.Background(), rev); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
