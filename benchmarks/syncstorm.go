package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// sync-storm: a whole-set target (one that takes the entire desired state
// at once: an nftables ruleset, a config file) under a steady storm of
// single-object changes. converge serves it with SyncOperations and its
// default debounce; a statedb user emulates it with BatchOperations whose
// every batch renders the whole table, paced by the round limiter.

// syncStormRoundRate is the statedb side's round limiter in sync-storm, in
// rounds per second (burst 1): one round per converge's default quiet
// period (100 ms). A round limiter has no trailing window: it can either
// keep a lone change's latency near converge's (a round at most every
// 100 ms, this choice) or render as rarely as converge does under a storm
// (one round a second, so a lone change after a round waits up to 1 s).
// It cannot do both; a user who cares for latency picks the former.
const syncStormRoundRate = 10

// Metric names of sync-storm.
const (
	metricSyncs      = "syncs"
	metricCPUSeconds = "cpu-s"
	metricP99Bound   = "p99-bound"
	// metricReconcilerCPU is the CPU of the rig's own goroutines, from a
	// labelled CPU profile (labelCPU).
	metricReconcilerCPU = "reconciler-cpu-s"
)

// Units of sync-storm's rows.
const (
	unitSyncs      = "syncs"
	unitCPUSeconds = "cpu-s"
)

// syncStormWorkload is sync-storm: syncObjects Done objects, then a storm
// of syncRate single-object changes per second for syncDuration, each
// change in a write transaction of its own, into a whole-set target whose
// every Sync (or batch) renders and hashes the whole table.
func syncStormWorkload(sz sizes) workload {
	run := func(side string) func(ctx context.Context) (measure, error) {
		return func(ctx context.Context) (measure, error) { return runSyncStorm(ctx, side, sz) }
	}
	storm := time.Duration(stormSamples(sz)) * time.Second / time.Duration(sz.syncRate)
	maxSyncs := math.Floor(1 + storm.Seconds()/reconciler.DefaultSyncMaxWait.Seconds())
	const name = "sync-storm"
	return workload{
		name: name,
		variants: []variant{
			{name: "converge", side: sideConverge, run: run(sideConverge)},
			{name: "statedb", side: sideStatedb, run: run(sideStatedb)},
			{name: "writes-only", side: sideLimit, run: run(sideLimit)},
		},
		rows: []rowSpec{
			{name: name + "/syncs", unit: unitSyncs, lowerBetter: true, ours: "converge", theirs: "statedb", metric: metricSyncs,
				goal: &goal{desc: fmt.Sprintf("converge <=%.0f", maxSyncs), met: func(o, _ float64) bool { return o <= maxSyncs }}},
			{name: name + "/p50", unit: unitMillis, lowerBetter: true, ours: "converge", theirs: "statedb", metric: metricP50},
			{name: name + "/p99", unit: unitMillis, lowerBetter: true, ours: "converge", theirs: "statedb", metric: metricP99},
			{name: name + "/p99-bound", unit: unitMillis, lowerBetter: true, reference: "max wait + longest Sync round",
				derive: func(med func(name, metric string) float64) (float64, float64) {
					return med("converge", metricP99), med("converge", metricP99Bound)
				},
				goal: &goal{desc: "<=bound", met: func(o, t float64) bool { return o <= t }}},
			// The process's CPU, the user's writes included, for
			// reference; the CPU goal is on what reconciling adds to them:
			// the writes alone cost more than a fifth of statedb's total.
			{name: name + "/cpu", unit: unitCPUSeconds, lowerBetter: true, ours: "converge", theirs: "statedb", metric: metricCPUSeconds},
			{name: name + "/reconciler-cpu", unit: unitCPUSeconds, lowerBetter: true, ours: "converge", theirs: "statedb", metric: metricReconcilerCPU,
				goal: fifthOfStatedb},
			{name: name + "/reconciler-cpu-by-difference", unit: unitCPUSeconds, lowerBetter: true, derive: reconcilerCPU},
		},
	}
}

// fifthOfStatedb is the goal of sync-storm's CPU rows: converge at least
// five times lower than statedb.
var fifthOfStatedb = &goal{desc: "<=0.20x statedb", met: func(o, t float64) bool { return o*5 <= t }}

// reconcilerCPU derives sync-storm/reconciler-cpu-by-difference: each side's CPU less
// that of the same writes into a table with no reconciler (writes-only),
// which neither side can avoid. A difference below zero is noise and reads
// 0.
func reconcilerCPU(med func(name, metric string) float64) (ours, theirs float64) {
	floor := med("writes-only", metricCPUSeconds)
	return max(0, med("converge", metricCPUSeconds)-floor), max(0, med("statedb", metricCPUSeconds)-floor)
}

// stormSamples is the number of changes in a storm: syncRate a second for
// syncDuration, at least one.
func stormSamples(sz sizes) int {
	return max(1, int(math.Round(float64(sz.syncRate)*sz.syncDuration.Seconds())))
}

// runSyncStorm preloads syncObjects Done objects, starts the hive, waits
// for converge's first Sync (statedb has none: its objects are Done), then
// writes the storm with the trickle of the latency workloads (open loop,
// on an absolute schedule, one write transaction per change, each change
// timed from just before its commit until an observer sees it Done) and
// measures until every change is Done: the renders run and the latencies.
// Then it writes the same storm again with no observers and measures the
// process CPU time until every object is Done. Every change hits a
// distinct object while there are enough. side sideLimit writes the same
// storms into a table with no reconciler, and measures only the CPU: the
// floor of the user's writes.
func runSyncStorm(ctx context.Context, side string, sz sizes) (measure, error) {
	n, samples := sz.syncObjects, stormSamples(sz)
	ids := distinctIDs(rand.New(rand.NewPCG(uint64(n), uint64(sz.syncRate))), n, min(n, samples))
	rt := newRenderTarget()
	opts := rigOptions{target: newTarget(), render: rt, preload: n}
	rigSide := side
	if side == sideLimit {
		opts, rigSide = rigOptions{preload: n}, sideConverge
	}
	r, err := startLabelled(ctx, rigSide, opts)
	if err != nil {
		return nil, err
	}
	if side == sideConverge {
		// The first Sync renders the preloaded table; the storm starts
		// after it.
		if err := waitClosed(ctx, rt.first, "the first Sync"); err != nil {
			return stopped(r, nil, err)
		}
	}
	// The latency storm: every change has an observer.
	var driven rig = r
	if side == sideLimit {
		driven = writesOnly{r}
	}
	tr := newTrickle(driven, sz.syncRate, ids)
	runtime.GC()
	rt.reset()
	err = tr.Run(ctx, samples, nil)
	st := rt.stats()
	m := measure(tr.Measure())
	m[metricSyncs] = float64(st.renders)
	m["render-ms-max"] = millis(st.longest)
	m["render-ms-mean"] = millis(st.total) / float64(max(st.renders, 1))
	if side == sideConverge {
		// One Sync, for the bound, is a whole round: the Sync and the
		// commit of its objects' statuses, which a change waits for too.
		m[metricP99Bound] = millis(reconciler.DefaultSyncMaxWait + st.longestRound)
		m["sync-round-ms-max"] = millis(st.longestRound)
	}
	if err == nil && side != sideLimit && (st.renders == 0 || st.objects != n) {
		err = fmt.Errorf("%d renders, the last of %d objects; want at least one of %d", st.renders, st.objects, n)
	}
	if err == nil {
		err = driven.waitAllDone(ctx)
	}
	if err != nil {
		return stopped(r, nil, err)
	}

	// The CPU storms: the same storm again with no observers, whose
	// goroutines and lookups cost the two sides alike and would bury the
	// difference; each measured from the first change until every object
	// is Done, the last Sync or round included. The figures are the mean
	// of cpuStorms of them: a storm's reconciler CPU is a few dozen
	// profile samples on converge's side.
	var cs cpuStorm
	for range cpuStorms {
		if err = cs.run(ctx, r, driven, rt, sz.syncRate, ids, samples); err != nil {
			break
		}
	}
	if !cs.unlabelled && side != sideLimit {
		m[metricReconcilerCPU] = cs.labelled.Seconds() / cpuStorms
	}
	m[metricCPUSeconds] = cs.cpu.Seconds() / cpuStorms
	m[metricSeconds] = cs.wall.Seconds() / cpuStorms
	m["cpu-storm-syncs"] = float64(cs.syncs) / cpuStorms
	if side == sideLimit {
		for _, k := range []string{metricP50, metricP99, metricMax, metricFromDueP50, metricFromDueP99, metricSyncs, "render-ms-max", "render-ms-mean", "cpu-storm-syncs"} {
			delete(m, k) // nothing is reconciled: no latency, no render
		}
	}
	return stopped(r, m, err)
}

// cpuStorms is how many CPU storms each run of sync-storm measures.
const cpuStorms = 3

// cpuStorm sums the CPU storms of one run.
type cpuStorm struct {
	labelled   time.Duration // the rig's goroutines (labelCPU)
	unlabelled bool          // labelCPU measured nothing in some storm
	cpu        time.Duration // the whole process
	wall       time.Duration
	syncs      int
}

// run writes one storm of samples changes to ids at rate per second with
// no observers, waits until driven has every object Done, and adds what
// it cost.
func (c *cpuStorm) run(ctx context.Context, r rig, driven rig, rt *renderTarget, rate int, ids []int, samples int) error {
	tr := newTrickle(writesOnly{r}, rate, ids)
	runtime.GC()
	rt.reset()
	cpu0, t0 := cpuTime(), time.Now()
	labelled, ok, err := labelCPU(func() error {
		if err := tr.Run(ctx, samples, nil); err != nil {
			return err
		}
		return driven.waitAllDone(ctx)
	})
	c.cpu += cpuTime() - cpu0
	c.wall += time.Since(t0)
	c.labelled += labelled
	c.unlabelled = c.unlabelled || !ok
	c.syncs += rt.stats().renders
	return err
}

// writesOnly is a rig with no reconciler driven by a trickle: every change
// counts as Done at once, so that the trickle only writes.
type writesOnly struct{ rig }

func (writesOnly) waitObjectDone(context.Context, int, statedb.Revision) error { return nil }

func (writesOnly) waitAllDone(context.Context) error { return nil }

// millis is d in milliseconds, the unit of latencies.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// renderTarget is the whole-set target of sync-storm. A render writes one
// line per desired object, as an nftables ruleset for nft -f would have
// it, into a buffer that is reused, and hashes the text with SHA-256, as a
// user does to compare it with what the target has loaded. Both sides call
// the same render over every object in their snapshot. It counts the
// renders and their durations.
type renderTarget struct {
	first     chan struct{} // closed when the first render ends
	firstOnce sync.Once
	rounds    syncRounds // converge's Metrics

	mu     sync.Mutex
	buf    []byte
	digest [sha256.Size]byte
	st     renderStats
}

// renderStats are a renderTarget's counts since its last reset.
type renderStats struct {
	renders int
	objects int           // objects in the last render
	longest time.Duration // the longest render
	total   time.Duration // all renders

	// longestRound is converge's longest Sync round: from its start until
	// the statuses of its objects are committed.
	longestRound time.Duration
}

func newRenderTarget() *renderTarget { return &renderTarget{first: make(chan struct{})} }

// reset zeroes the counts.
func (t *renderTarget) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.st = renderStats{}
	t.rounds.mu.Lock()
	defer t.rounds.mu.Unlock()
	t.rounds.longest = 0
}

// stats returns the counts since the last reset.
func (t *renderTarget) stats() renderStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.st
	t.rounds.mu.Lock()
	defer t.rounds.mu.Unlock()
	st.longestRound = t.rounds.longest
	return st
}

// syncRounds are the Metrics of sync-storm's converge reconciler: they
// record nothing but the longest round, which for a whole-set reconciler
// runs from a Sync's start until its statuses are committed.
type syncRounds struct {
	reconciler.NopMetrics
	mu      sync.Mutex
	longest time.Duration
}

// Reconciler implements reconciler.Metrics.
func (m *syncRounds) Reconciler(reconciler.ReconcilerID) reconciler.ReconcilerMetrics { return m }

// Round implements reconciler.ReconcilerMetrics.
func (m *syncRounds) Round(_ int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.longest = max(m.longest, d)
}

// render renders every object of objs, whose key and value fields gives,
// and returns the digest of the text.
func render[Obj any](t *renderTarget, objs iter.Seq2[Obj, statedb.Revision], fields func(Obj) (id, value uint64)) [sha256.Size]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	start := time.Now()
	b, n := t.buf[:0], 0
	for obj := range objs {
		id, value := fields(obj)
		b = append(b, "add element inet converge desired { "...)
		b = strconv.AppendUint(b, id, 10)
		b = append(b, " : "...)
		b = strconv.AppendUint(b, value, 10)
		b = append(b, " }\n"...)
		n++
	}
	t.buf, t.digest = b, sha256.Sum256(b)
	d := time.Since(start)
	t.st.renders++
	t.st.objects = n
	t.st.longest = max(t.st.longest, d)
	t.st.total += d
	t.firstOnce.Do(func() { close(t.first) })
	return t.digest
}

func (o *convergeObject) fields() (id, value uint64) { return o.ID, o.Value }
