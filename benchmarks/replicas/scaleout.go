package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/shard"
)

// scaleRun is what one run of the scale-out row saw.
type scaleRun struct {
	replicas int
	// steady is the operations per second of all replicas together while
	// every one of them still had a backlog.
	steady float64
	// bulk is the objects per second of the whole load: every object
	// over the time until the last replica finished.
	bulk float64
	// cpu is the process's CPU seconds per second over the steady window.
	cpu float64
	// share is the largest fraction of the objects one replica owned.
	share float64
	// opMean is the mean time an operation took (nominally o.delay);
	// runQueue the time the process's threads waited for a CPU, per
	// second of the window: together they tell a slow machine from a
	// slow reconciler.
	opMean   time.Duration
	runQueue time.Duration
}

// scaleOut measures issue 20's scale-out row: 1 replica, then 3, each a
// real reconciler with Concurrency 16 on a target whose operations take
// 10 ms, reconcile the same o.scaleObjects objects. The row is the ratio of
// the replicas' combined throughput at saturation (every replica still
// has a backlog): the capacity that adding replicas buys.
func scaleOut(o options, cli *clientv3.Client, log io.Writer) ([]row, error) {
	// 1 and 3 replicas run in alternation, o.scalePairs times, and each
	// pair is judged on its own: on a shared machine the load of other
	// work changes between runs more than within a pair.
	var ones, threes []scaleRun
	var ratios, bulks []float64
	for range o.scalePairs {
		one, err := scaleOnce(o, cli, 1, log)
		if err != nil {
			return nil, err
		}
		three, err := scaleOnce(o, cli, 3, log)
		if err != nil {
			return nil, err
		}
		ones, threes = append(ones, one), append(threes, three)
		ratios = append(ratios, three.steady/one.steady)
		bulks = append(bulks, three.bulk/one.bulk)
	}
	mid := medianIndex(ratios)
	one, three := ones[mid], threes[mid]
	ideal := float64(o.concurrency) / o.delay.Seconds()
	detail := func(r scaleRun) string {
		return fmt.Sprintf("%.0f ops/s (ideal %.0f), CPU %.2f of %d cores, mean operation %.2f ms (nominal %v), run-queue wait %.0f ms/s, largest share %.0f%%",
			r.steady, ideal*float64(r.replicas), r.cpu, numCPU(), ms(r.opMean), o.delay, ms(r.runQueue), 100*r.share)
	}
	return []row{
		atLeast("scale-out/3-vs-1", ratios[mid], "x", 2.8,
			fmt.Sprintf("capacity at saturation; the median pair of %d, all: %s", len(ratios), list(ratios))),
		{Name: "scale-out/1-replica", Value: one.steady, Unit: "ops/s", Detail: detail(one)},
		{Name: "scale-out/3-replicas", Value: three.steady, Unit: "ops/s", Detail: detail(three)},
		{Name: "scale-out/bulk-3-vs-1", Value: bulks[mid], Unit: "x",
			Detail: fmt.Sprintf("the whole load, until the busiest replica is done: %.0f vs %.0f objects/s", three.bulk, one.bulk)},
	}, nil
}

// medianIndex returns the index of the median of xs (the lower one of an
// even count).
func medianIndex(xs []float64) int {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(xs[a], xs[b]) })
	return idx[(len(idx)-1)/2]
}

// list prints xs as "2.91x 2.95x".
func list(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = num(x) + "x"
	}
	return strings.Join(parts, " ")
}

// scaleOnce runs n replicas: they join and settle their slots first, with
// an empty table; then every replica is given all the objects at once, and
// the completed operations are sampled until all are done.
func scaleOnce(o options, cli *clientv3.Client, n int, log io.Writer) (scaleRun, error) {
	const patience = 60 * time.Second
	f := newFleet(cli, fmt.Sprintf("/bench/scale-out-%d", n), o, 0, o.delay)
	defer f.stopAll()
	g, err := watchGroup(cli, f.prefix, o.slots)
	if err != nil {
		return scaleRun{}, err
	}
	defer g.stop()
	names := []string{"a", "b", "c"}[:n]
	for _, name := range names {
		if err := f.add(name); err != nil {
			return scaleRun{}, err
		}
	}
	if err := g.waitFor(patience, g.balanced(names...)); err != nil {
		return scaleRun{}, err
	}
	// Each replica's share of the objects, by the slots it owns.
	owners := g.owners()
	share := map[string]int64{}
	for i := range o.scaleObjects {
		share[owners[shard.SlotOf([]byte(objectKey(i)), o.slots)]]++
	}
	run := scaleRun{replicas: n}
	for _, c := range share {
		run.share = max(run.share, float64(c)/float64(o.scaleObjects))
	}

	f.mu.Lock()
	for _, r := range f.replicas {
		r.desire(0, o.scaleObjects, 1)
	}
	f.objects = o.scaleObjects
	f.mu.Unlock()
	start := time.Now()
	cpu0 := cpuTime()

	// The steady window opens after a warm-up and closes when the first
	// replica is nearly out of work (90% of its share done).
	win := steadyWindow{warm: start.Add(o.scaleWarmup)}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		now, done := time.Now(), f.completed()
		var total int64
		nearlyOut := false
		for name, d := range done {
			total += d
			nearlyOut = nearlyOut || d >= share[name]*9/10
		}
		win.observe(now, total, nearlyOut)
		if total >= int64(o.scaleObjects) {
			run.bulk = float64(o.scaleObjects) / now.Sub(start).Seconds()
			break
		}
		if now.Sub(start) > 10*time.Minute {
			return run, fmt.Errorf("%d replicas: %d of %d operations after 10 minutes", n, total, o.scaleObjects)
		}
	}
	if err := win.rates(&run); err != nil {
		return run, fmt.Errorf("%d replicas: %w (warm-up %v too long for %d objects?)", n, err, o.scaleWarmup, o.scaleObjects)
	}
	winLen := win.end.Sub(win.start)
	run.opMean, _ = f.target.meanOp()
	fmt.Fprintf(log, "scale-out %d replica(s): %.0f ops/s steady over %v, whole load %.0f objects/s, CPU %.2f, process CPU total %v, mean operation %v, run-queue wait %v/s\n",
		n, run.steady, winLen.Round(time.Millisecond), run.bulk, run.cpu, (cpuTime() - cpu0).Round(time.Millisecond),
		run.opMean.Round(10*time.Microsecond), run.runQueue.Round(time.Millisecond))
	if err := f.waitSettled(patience); err != nil {
		return run, err
	}
	return run, f.stopAll()
}

// steadyWindow is scale-out's measuring window: it opens at the first
// sample after warm and closes at the first sample at which a replica is
// nearly out of work, recording the operations done, the process's CPU
// time and its run-queue wait at both ends.
type steadyWindow struct {
	warm                 time.Time
	start, end           time.Time
	ops0, ops1           int64
	cpu0, cpu1, rq0, rq1 time.Duration
}

// observe takes one sample: now, the operations done in all, and whether
// some replica is nearly out of work.
func (w *steadyWindow) observe(now time.Time, total int64, nearlyOut bool) {
	if w.start.IsZero() && now.After(w.warm) {
		w.start, w.ops0, w.cpu0, w.rq0 = now, total, cpuTime(), runQueueWait()
	}
	if !w.start.IsZero() && w.end.IsZero() && nearlyOut {
		w.end, w.ops1, w.cpu1, w.rq1 = now, total, cpuTime(), runQueueWait()
	}
}

// rates sets run's steady throughput, CPU and run-queue wait from the
// window, which must have closed after it opened.
func (w *steadyWindow) rates(run *scaleRun) error {
	if w.end.IsZero() || !w.end.After(w.start) {
		return fmt.Errorf("no steady window")
	}
	secs := w.end.Sub(w.start).Seconds()
	run.steady = float64(w.ops1-w.ops0) / secs
	run.cpu = (w.cpu1 - w.cpu0).Seconds() / secs
	run.runQueue = time.Duration(float64(w.rq1-w.rq0) / secs)
	return nil
}
