package main

import (
	"context"
	"fmt"
	"time"

	"github.com/converge-go/converge/benchmarks/internal/bench"
	"github.com/converge-go/converge/benchmarks/internal/waitorder"
)

// sizes are the knobs of the workloads; flags set them.
type sizes struct {
	noopObjects    int           // noop-1m: objects inserted
	insertBatch    int           // objects per insert transaction, everywhere
	slowObjects    int           // slow-1ms: objects inserted, at least
	slowPerWorker  int           // slow-1ms: and at least this many per worker (Concurrency)
	slowDelay      time.Duration // slow-1ms: how long each Update sleeps
	latencySmall   int           // latency: Done objects in the small table
	latencyLarge   int           // latency: Done objects in the large table
	latencySamples int           // latency: single-object changes per run
	latencyGap     time.Duration // latency: pause before each change
	trickleSamples int           // latency/trickle-*: changes per run
	bulkObjects    int           // latency/bulk+trickle: new objects per bulk load
	bulkLoads      int           // latency/bulk+trickle: bulk loads per run
	retryObjects   int           // retry-storm: objects inserted
	retryHeal      time.Duration // retry-storm: how long the target fails
	fullObjects    int           // full: objects in the table
	routesSmall    int           // routes-<n>: kernel routes, the small size
	routesLarge    int           // routes-<n>: kernel routes, the large size
	runTimeout     time.Duration // the most one run may take

	syncObjects  int           // sync-storm: objects in the table
	syncRate     int           // sync-storm: changes per second
	syncDuration time.Duration // sync-storm: how long the storm lasts

	wakeResidentMiB int // machine/wake: the large heap, in MiB

	sourceObjects int // source: objects listed, and events applied
	sourceFiles   int // files: manifest files of 10 objects each
	fileEdits     int // files: single-file edits measured per run

	backlogObjects int           // startup+changes, noisy-tenant: the backlog
	backlogSamples int           // startup+changes, noisy-tenant: changes measured with no backlog
	hungObjects    int           // hung-target: objects over the four targets
	hungWindow     time.Duration // hung-target: how long the throughput is measured

	deps depsSizes // deps/*: issue 51's dependency workloads
}

// fullSizes are the sizes of the workloads.
func fullSizes() sizes {
	order := waitorder.FullSizes()
	return sizes{
		noopObjects:    1_000_000,
		insertBatch:    1000,
		slowObjects:    5000,
		slowPerWorker:  200,
		slowDelay:      time.Millisecond,
		latencySmall:   1000,
		latencyLarge:   1_000_000,
		latencySamples: 1000,
		latencyGap:     5 * time.Second / bench.RoundRate,
		trickleSamples: 1000,
		bulkObjects:    100_000,
		bulkLoads:      4,
		retryObjects:   100_000,
		retryHeal:      2 * time.Second,
		fullObjects:    1_000_000,
		routesSmall:    10_000,
		routesLarge:    100_000,
		runTimeout:     5 * time.Minute,
		syncObjects:    100_000,
		syncRate:       1000,
		syncDuration:   5 * time.Second,
		// About what a 1M-object run holds resident.
		wakeResidentMiB: 1536,
		sourceObjects:   1_000_000,
		sourceFiles:     10_000,
		fileEdits:       100,
		backlogObjects:  order.Backlog,
		backlogSamples:  order.Samples,
		hungObjects:     order.HungObjects,
		hungWindow:      order.HungWindow,
		deps:            fullDepsSizes(),
	}
}

// quickSizes shrink every workload so that a whole run takes about two
// minutes on 2 cores, as root with the routes workloads (40 s of it the
// waiting-order workloads).
func quickSizes() sizes {
	order := waitorder.QuickSizes()
	return sizes{
		noopObjects:     100_000,
		insertBatch:     1000,
		slowObjects:     300,
		slowPerWorker:   10,
		slowDelay:       time.Millisecond,
		latencySmall:    1000,
		latencyLarge:    50_000,
		latencySamples:  100,
		latencyGap:      5 * time.Second / bench.RoundRate,
		trickleSamples:  200,
		bulkObjects:     20_000,
		bulkLoads:       2,
		retryObjects:    5000,
		retryHeal:       300 * time.Millisecond,
		fullObjects:     50_000,
		routesSmall:     1000,
		routesLarge:     10_000,
		runTimeout:      time.Minute,
		syncObjects:     20_000,
		syncRate:        1000,
		syncDuration:    time.Second,
		wakeResidentMiB: 64,
		sourceObjects:   100_000,
		sourceFiles:     1000,
		fileEdits:       20,
		backlogObjects:  order.Backlog,
		backlogSamples:  order.Samples,
		hungObjects:     order.HungObjects,
		hungWindow:      order.HungWindow,
		deps:            quickDepsSizes(),
	}
}

// measure is what one run of one variant measured, by metric name.
type measure map[string]float64

// variant is one of the things a workload compares: a reconciler in one
// configuration, or a reference. Its run builds a fresh hive, measures and
// stops the hive.
type variant struct {
	name string // unique within the workload: "converge", "statedb-1k", ...
	side string // sideConverge, sideStatedb or sideLimit, for -side
	run  func(ctx context.Context) (measure, error)
}

const (
	sideConverge = "converge"
	sideStatedb  = "statedb"
	sideLimit    = "limit" // the table's own limit, no reconciler
)

// rowSpec says how one row of the table is computed from the medians of
// the runs: "ours" is converge, "theirs" is statedb unless reference says
// what else it is.
type rowSpec struct {
	name        string
	unit        string
	lowerBetter bool
	ours        string // variant whose metric is the converge column
	theirs      string // variant whose metric is the statedb column
	metric      string
	reference   string // non-empty when theirs is not statedb: what it is
	goal        *goal

	// derive, when set, computes the two columns from the medians instead
	// of ours, theirs and metric.
	derive func(med func(name, metric string) float64) (ours, theirs float64)
}

// goal is one of the team's targets for a row.
type goal struct {
	desc string
	met  func(ours, theirs float64) bool
	// floor, when set, is a second way to meet it: ours at or below what
	// floor derives from the same runs (a limit no reconciler can go
	// below, where the goal says "or at the floor, whichever is higher").
	floor func(med func(name, metric string) float64) float64
}

// holds reports whether ours and theirs, with med for the floor, meet g.
func (g *goal) holds(ours, theirs float64, med func(name, metric string) float64) bool {
	return g.met(ours, theirs) || g.floor != nil && ours <= g.floor(med)
}

// workload is one named comparison: its variants run in alternation, each
// run a fresh hive, and its rows summarize the medians.
type workload struct {
	name     string
	variants []variant
	rows     []rowSpec

	// skip, when set, says why the workload cannot run on this machine,
	// or returns nil when it can. A skipped workload's rows are left out
	// of the result, with the reason in the progress log.
	skip func() error
}

// workloads returns every workload at the given sizes.
func workloads(sz sizes) []workload {
	return append([]workload{
		noopWorkload(sz),
		slowWorkload(sz),
		latencyWorkload(sz),
		trickleWorkload(sz, 500),
		trickleWorkload(sz, 2000),
		bulkTrickleWorkload(sz),
		retryWorkload(sz),
		fullWorkload(sz),
		syncStormWorkload(sz),
		wakeWorkload(sz),
		sourceWorkload(sz),
		filesWorkload(sz),
		startupWorkload(sz),
		noisyWorkload(sz),
		hungWorkload(sz),
		routesWorkload(sz, sz.routesSmall),
		routesWorkload(sz, sz.routesLarge),
	}, depsWorkloads(sz)...)
}

// newRig builds the rig of a side.
func newRig(ctx context.Context, side string, opts rigOptions) (rig, error) {
	switch side {
	case sideConverge:
		r, err := newConvergeRig(ctx, opts)
		if err != nil {
			return nil, err
		}
		return r, nil
	case sideStatedb:
		r, err := newStatedbRig(ctx, opts)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	return nil, fmt.Errorf("unknown side %q", side)
}

// startRig builds and starts a rig; the returned stop must be called.
func startRig(ctx context.Context, side string, opts rigOptions) (rig, error) {
	r, err := newRig(ctx, side, opts)
	if err != nil {
		return nil, err
	}
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// insertAll inserts objects [0, n) as Pending, batch objects per write
// transaction.
func insertAll(r rig, n, batch int) { insertRange(r, 0, n, batch) }

// insertRange inserts objects [from, to) as Pending, batch objects per
// write transaction.
func insertRange(r rig, from, to, batch int) {
	for ; from < to; from += batch {
		r.insertPending(from, min(from+batch, to))
	}
}

// stopped stops r and joins its error with err.
func stopped(r rig, m measure, err error) (measure, error) {
	if serr := r.stop(); serr != nil && err == nil {
		err = fmt.Errorf("stopping the hive: %w", serr)
	}
	return m, err
}

// perObject is d in microseconds per object.
func perObject(d time.Duration, n int) float64 {
	return float64(d) / float64(time.Microsecond) / float64(n)
}

// countLabel names a size: 1000 -> "1k", 1000000 -> "1m".
func countLabel(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dm", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
