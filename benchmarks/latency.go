package main

import (
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/converge-go/converge/benchmarks/internal/bench"
	"github.com/converge-go/converge/benchmarks/internal/trickle"
)

// latencyWorkload is latency/isolated: single changes far apart, each
// finding the reconciler idle, at both table sizes.
func latencyWorkload(sz sizes) workload {
	w := tableSizesWorkload("latency/isolated", sz, func(ctx context.Context, side string, n int) (measure, error) {
		return runLatency(ctx, side, n, sz)
	})
	for _, l := range slices.Compact([]string{countLabel(sz.latencySmall), countLabel(sz.latencyLarge)}) {
		w.rows = append(w.rows, cpuPerChangeRow(w.name+"/"+l, "converge-"+l, "statedb-"+l))
	}
	return w
}

// tableSizesWorkload is a latency workload run at the small and the large
// table size (latencySmall, latencyLarge): one variant per side and size,
// p50 and p99 rows per size, both with the goal "<=statedb" (issue 13
// demands both), and the row comparing each side's p99 at the large size
// with its p99 at the small size, whose goal is that converge's tail grows
// by no more than 1.5x.
func tableSizesWorkload(name string, sz sizes, run func(ctx context.Context, side string, n int) (measure, error)) workload {
	variant := func(side string, n int) variant {
		return variant{name: side + "-" + countLabel(n), side: side, run: func(ctx context.Context) (measure, error) { return run(ctx, side, n) }}
	}
	small, large := countLabel(sz.latencySmall), countLabel(sz.latencyLarge)
	w := workload{name: name}
	tableSizes := []int{sz.latencySmall, sz.latencyLarge}
	if small == large {
		tableSizes = tableSizes[:1]
	}
	for _, n := range tableSizes {
		l := countLabel(n)
		w.variants = append(w.variants, variant(sideConverge, n), variant(sideStatedb, n))
		w.rows = append(w.rows, latencyRows(name+"/"+l, "converge-"+l, "statedb-"+l)...)
	}
	if small == large {
		return w
	}
	w.rows = append(w.rows, rowSpec{
		name: name + "/p99-" + large + "-vs-" + small, unit: unitTimes, lowerBetter: true,
		derive: func(med func(name, metric string) float64) (float64, float64) {
			return med("converge-"+large, metricP99) / med("converge-"+small, metricP99),
				med("statedb-"+large, metricP99) / med("statedb-"+small, metricP99)
		},
		goal: &goal{desc: "converge <=1.5x", met: func(o, _ float64) bool { return o <= 1.5 }},
	})
	return w
}

// metricCPUPerChange is the process's CPU time per change, in
// microseconds: everything the change costs, the waiter's and the
// writer's share (the same on both sides) included, and what the
// reconciler does after the change is Done (reading its own write back).
const metricCPUPerChange = "cpu-us/change"

// cpuPerChangeRow is the row prefix/cpu: CPU per change, ours against
// theirs, without a goal.
func cpuPerChangeRow(prefix, ours, theirs string) rowSpec {
	return rowSpec{name: prefix + "/cpu", unit: unitCPUMicrosPerChange, lowerBetter: true,
		ours: ours, theirs: theirs, metric: metricCPUPerChange}
}

// latencyRows are the rows prefix/p50 and prefix/p99 of a latency
// comparison between the variants ours and theirs, in milliseconds, each
// with the goal "<=statedb".
func latencyRows(prefix, ours, theirs string) []rowSpec {
	var rows []rowSpec
	for _, p := range []string{metricP50, metricP99} {
		rows = append(rows, rowSpec{name: prefix + "/" + p, unit: unitMillis, lowerBetter: true,
			ours: ours, theirs: theirs, metric: p,
			goal: &goal{desc: "<=statedb", met: func(o, t float64) bool { return o <= t }}})
	}
	return rows
}

// runLatency fills a table with n Done objects, then changes one object
// at a time (a new value and a Pending status) and measures the time from
// just before the change's commit until the waiter sees the object Done.
// Changes are latencyGap apart (by default five times the round limiter's
// interval), so each finds the reconciler idle and its
// round limiter with a token: this measures the latency of one change, not
// the limiter's pacing.
func runLatency(ctx context.Context, side string, n int, sz sizes) (measure, error) {
	r, err := startFilled(ctx, side, n, sz.insertBatch)
	if err != nil {
		return nil, err
	}
	rnd := rand.New(rand.NewPCG(uint64(n), 6))
	lat := make([]float64, 0, sz.latencySamples)
	alloc0, cpu0 := bench.TotalAlloc(), cpuTime()
	for range sz.latencySamples {
		time.Sleep(sz.latencyGap)
		id := rnd.IntN(n)
		rev, t0 := r.touch(id)
		if err := r.waitObjectDone(ctx, id, rev); err != nil {
			return stopped(r, nil, err)
		}
		lat = append(lat, millisSince(t0))
	}
	cpu := cpuTime() - cpu0
	m := latencyMeasure(lat)
	m["bytes/change"] = float64(bench.TotalAlloc()-alloc0) / float64(sz.latencySamples)
	m[metricCPUPerChange] = float64(cpu.Microseconds()) / float64(sz.latencySamples)
	return stopped(r, m, nil)
}

// startFilled starts side's rig and fills its table with n objects, Done
// before it returns. The fill's garbage is collected, so that the
// measurement that follows does not pay for it.
func startFilled(ctx context.Context, side string, n, batch int) (rig, error) {
	r, err := startRig(ctx, side, rigOptions{target: newTarget()})
	if err != nil {
		return nil, err
	}
	insertAll(r, n, batch)
	if err := r.waitAllDone(ctx); err != nil {
		_, err = stopped(r, nil, err)
		return nil, err
	}
	runtime.GC()
	return r, nil
}

// millisSince is the time since t0 in milliseconds, the unit of latencies.
func millisSince(t0 time.Time) float64 { return trickle.MillisSince(t0) }

// latencyMeasure summarizes one run's latencies in milliseconds: p50, p99
// and the maximum. It sorts lat.
func latencyMeasure(lat []float64) measure { return measure(trickle.Latencies(lat)) }
