package main

import (
	"context"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"
)

func latencyWorkload(sz sizes) workload {
	run := func(side string, n int) func(ctx context.Context) (measure, error) {
		return func(ctx context.Context) (measure, error) { return runLatency(ctx, side, n, sz) }
	}
	small, large := countLabel(sz.latencySmall), countLabel(sz.latencyLarge)
	w := workload{name: "latency"}
	tableSizes := []int{sz.latencySmall, sz.latencyLarge}
	if small == large {
		tableSizes = tableSizes[:1]
	}
	for _, n := range tableSizes {
		l := countLabel(n)
		w.variants = append(w.variants,
			variant{name: "converge-" + l, side: sideConverge, run: run(sideConverge, n)},
			variant{name: "statedb-" + l, side: sideStatedb, run: run(sideStatedb, n)})
		for _, p := range []string{metricP50, metricP99} {
			row := rowSpec{name: "latency/" + l + "/" + p, unit: unitMillis, lowerBetter: true,
				ours: "converge-" + l, theirs: "statedb-" + l, metric: p}
			if p == metricP99 {
				row.goal = &goal{desc: "<=statedb", met: func(o, t float64) bool { return o <= t }}
			}
			w.rows = append(w.rows, row)
		}
	}
	if small == large {
		return w
	}
	w.rows = append(w.rows, rowSpec{
		name: "latency/p99-" + large + "-vs-" + small, unit: unitTimes, lowerBetter: true,
		derive: func(med func(name, metric string) float64) (float64, float64) {
			return med("converge-"+large, metricP99) / med("converge-"+small, metricP99),
				med("statedb-"+large, metricP99) / med("statedb-"+small, metricP99)
		},
		goal: &goal{desc: "converge <=1.5x", met: func(o, _ float64) bool { return o <= 1.5 }},
	})
	return w
}

// runLatency fills a table with n Done objects, then changes one object
// at a time (a new value and a Pending status) and measures the time from
// just before the change's commit until the waiter sees the object Done.
// Changes are latencyGap apart (by default five times the round limiter's
// interval), so each finds the reconciler idle and its
// round limiter with a token: this measures the latency of one change, not
// the limiter's pacing.
func runLatency(ctx context.Context, side string, n int, sz sizes) (measure, error) {
	tg := newTarget()
	r, err := startRig(ctx, side, rigOptions{target: tg})
	if err != nil {
		return nil, err
	}
	insertAll(r, n, sz.insertBatch)
	if err := r.waitAllDone(ctx); err != nil {
		return stopped(r, nil, err)
	}
	// Collect the fill's garbage now rather than during the samples.
	runtime.GC()
	rnd := rand.New(rand.NewPCG(uint64(n), 6))
	lat := make([]float64, 0, sz.latencySamples)
	alloc0 := totalAlloc()
	for range sz.latencySamples {
		time.Sleep(sz.latencyGap)
		id := rnd.IntN(n)
		rev, t0 := r.touch(id)
		if err := r.waitObjectDone(ctx, id, rev); err != nil {
			return stopped(r, nil, err)
		}
		lat = append(lat, float64(time.Since(t0))/float64(time.Millisecond))
	}
	allocPerChange := float64(totalAlloc()-alloc0) / float64(sz.latencySamples)
	slices.Sort(lat)
	return stopped(r, measure{
		metricP50:      percentile(lat, 50),
		metricP99:      percentile(lat, 99),
		"max":          lat[len(lat)-1],
		"bytes/change": allocPerChange,
	}, nil)
}
