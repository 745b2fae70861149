package main

import (
	"fmt"
	"io"
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
}

// scaleOut measures issue 20's scale-out row: 1 replica, then 3, each a
// real reconciler with Concurrency 16 on a target whose operations take
// 10 ms, reconcile the same o.scaleObjects objects. The row is the ratio of
// the replicas' combined throughput at saturation (every replica still
// has a backlog): the capacity that adding replicas buys.
func scaleOut(o options, cli *clientv3.Client, log io.Writer) ([]row, error) {
	one, err := scaleOnce(o, cli, 1, log)
	if err != nil {
		return nil, err
	}
	three, err := scaleOnce(o, cli, 3, log)
	if err != nil {
		return nil, err
	}
	ideal := float64(o.concurrency) / o.delay.Seconds()
	detail := func(r scaleRun) string {
		return fmt.Sprintf("%.0f ops/s (ideal %.0f), CPU %.2f of %d cores, largest share %.0f%%",
			r.steady, ideal*float64(r.replicas), r.cpu, numCPU(), 100*r.share)
	}
	return []row{
		atLeast("scale-out/3-vs-1", three.steady/one.steady, "x", 2.8, "capacity at saturation"),
		{Name: "scale-out/1-replica", Value: one.steady, Unit: "ops/s", Detail: detail(one)},
		{Name: "scale-out/3-replicas", Value: three.steady, Unit: "ops/s", Detail: detail(three)},
		{Name: "scale-out/bulk-3-vs-1", Value: three.bulk / one.bulk, Unit: "x",
			Detail: fmt.Sprintf("the whole load, until the busiest replica is done: %.0f vs %.0f objects/s", three.bulk, one.bulk)},
	}, nil
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
	warm := start.Add(o.scaleWarmup)
	var winStart, winEnd time.Time
	var opsStart, opsEnd int64
	var cpuStart, cpuEnd time.Duration
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
		if winStart.IsZero() && now.After(warm) {
			winStart, opsStart, cpuStart = now, total, cpuTime()
		}
		if !winStart.IsZero() && winEnd.IsZero() && nearlyOut {
			winEnd, opsEnd, cpuEnd = now, total, cpuTime()
		}
		if total >= int64(o.scaleObjects) {
			run.bulk = float64(o.scaleObjects) / now.Sub(start).Seconds()
			break
		}
		if now.Sub(start) > 10*time.Minute {
			return run, fmt.Errorf("%d replicas: %d of %d operations after 10 minutes", n, total, o.scaleObjects)
		}
	}
	if winEnd.IsZero() || !winEnd.After(winStart) {
		return run, fmt.Errorf("%d replicas: no steady window (warm-up %v too long for %d objects?)", n, o.scaleWarmup, o.scaleObjects)
	}
	run.steady = float64(opsEnd-opsStart) / winEnd.Sub(winStart).Seconds()
	run.cpu = (cpuEnd - cpuStart).Seconds() / winEnd.Sub(winStart).Seconds()
	fmt.Fprintf(log, "scale-out %d replica(s): %.0f ops/s steady over %v, whole load %.0f objects/s, CPU %.2f, process CPU total %v\n",
		n, run.steady, winEnd.Sub(winStart).Round(time.Millisecond), run.bulk, run.cpu, (cpuTime() - cpu0).Round(time.Millisecond))
	if err := f.waitSettled(patience); err != nil {
		return run, err
	}
	return run, f.stopAll()
}
