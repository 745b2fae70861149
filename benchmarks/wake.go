package main

import (
	"context"
	"runtime"
	"time"
)

// wakeSleep is how long machine/wake's goroutine sleeps each time: the
// gap between a trickle-500's changes.
const wakeSleep = 2 * time.Millisecond

// wakeWorkload is machine/wake. It measures the machine, not a
// reconciler: how late a goroutine that sleeps wakeSleep wakes up, in a
// process holding a small heap and in one holding as much resident
// memory as a 1M-object run. On a virtual machine whose host backs guest
// memory lazily, the second can wake milliseconds late now and then, with
// nothing else running; that lateness lands in the 1M latency rows of
// both sides, and sets the floor under their p99. Compare the p99 rows'
// 1m-vs-1k growth with this row's.
func wakeWorkload(sz sizes) workload {
	run := func(mib int) func(ctx context.Context) (measure, error) {
		return func(ctx context.Context) (measure, error) { return runWake(ctx, mib, sz.latencySamples) }
	}
	const name = "machine/wake"
	const large, small = "resident-large", "resident-small"
	row := func(suffix, metric string) rowSpec {
		return rowSpec{name: name + "/" + suffix, unit: unitMillis, lowerBetter: true, ours: large, theirs: small,
			metric: metric, reference: "lateness with a small heap"}
	}
	return workload{
		name: name,
		variants: []variant{
			{name: large, side: sideLimit, run: run(sz.wakeResidentMiB)},
			{name: small, side: sideLimit, run: run(0)},
		},
		rows: []rowSpec{row("p50", metricP50), row("p99", metricP99), row("max", metricMax)},
	}
}

// runWake holds mib MiB of touched memory and measures, samples times,
// how late a sleep of wakeSleep ends, in ms.
func runWake(ctx context.Context, mib, samples int) (measure, error) {
	mem := make([]byte, mib<<20)
	for i := 0; i < len(mem); i += 4096 {
		mem[i] = 1
	}
	runtime.GC()
	late := make([]float64, 0, samples)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for range samples {
		due := time.Now().Add(wakeSleep)
		t.Reset(wakeSleep)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
		late = append(late, millisSince(due))
	}
	runtime.KeepAlive(mem)
	return latencyMeasure(late), nil
}
