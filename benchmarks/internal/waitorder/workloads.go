package waitorder

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/converge-go/converge/benchmarks/internal/bench"
	"github.com/converge-go/converge/benchmarks/internal/trickle"
)

// Metric names in what the workloads return. Latencies are in
// milliseconds, durations in seconds, throughputs in objects a second.
const (
	P50          = trickle.P50         // the changes during the backlog
	P99          = trickle.P99         //
	AfterP99     = trickle.AfterP99    // the changes committed once the backlog's inserts had returned
	FloorP99     = "floor-p99"         // the changes while the backlog is inserted already Done (Sizes.Floor)
	AloneP50     = "alone-p50"         // the changes with no backlog
	AloneP99     = "alone-p99"         //
	LoadSeconds  = "load-s"            // the backlog, from its first insert until its last object is Done, during the changes
	LoadBytes    = "load-bytes"        // bytes the process allocated over the same span (the GC's work follows it)
	AloneLoad    = "alone-load-s"      // the same backlog with no changes
	Healthy      = "healthy/s"         // hung-target: the healthy targets' successful Updates a second, one target hung
	HealthyAlone = "no-hung-healthy/s" // the same with no target hung
	HungFailed   = "hung-timeouts"     // hung-target: Updates that hung until the timeout
)

// Priorities of startup+changes: the changes' objects high, the backlog
// low (controller-runtime's priority queue puts an initial list at -100,
// its LowPriority, and changes at 0).
const (
	HighPriority = 0
	LowPriority  = -100
)

// StartupPriority is startup+changes' Order.Priority: the pool's objects
// high, the backlog low.
func StartupPriority(id uint64) int {
	if id < Pool {
		return HighPriority
	}
	return LowPriority
}

// Tenant is noisy-tenant's Order.FairnessKey: the pool is tenant B's, the
// burst tenant A's.
func Tenant(id uint64) string {
	if id < Pool {
		return "B"
	}
	return "A"
}

// RunStartup runs startup+changes on the systems f builds, with order
// (zero: FIFO; StartupPriority for the prioritized variants). Three
// phases, each on a fresh system with the pool's Pool objects Done:
//
//  1. with the backlog: changes to the pool at StartupRate a second, from
//     just before the first of Backlog new objects is inserted (in
//     writes of InsertBatch) until the last of them is Done;
//  2. the changes alone: Samples changes at the same rate, no backlog;
//  3. the backlog alone, no changes.
//
// The backlog's duration is timed until its last object is Done: every
// side takes equals in the order they came, so that one is Done last,
// give or take the operations beside it.
func RunStartup(ctx context.Context, f Factory, sz Sizes, order Order) (map[string]float64, error) {
	setup := func() Setup {
		return Setup{Target: NewTarget(sz.Delay, 1, -1), Concurrency: sz.Concurrency, Preload: Pool, Order: order}
	}
	m, err := backlogAndChanges(ctx, f, setup(), sz, StartupRate)
	if err != nil {
		return nil, err
	}
	if sz.Floor {
		if m[FloorP99], err = floorChanges(ctx, f, setup(), sz, StartupRate, seconds(m[LoadSeconds])); err != nil {
			return nil, err
		}
	}
	p50, p99, err := changesAlone(ctx, f, setup(), sz, StartupRate)
	if err != nil {
		return nil, err
	}
	m[AloneP50], m[AloneP99] = p50, p99
	load, err := backlogAlone(ctx, f, setup(), sz)
	if err != nil {
		return nil, err
	}
	m[AloneLoad] = load.Seconds()
	return m, nil
}

// RunNoisy runs noisy-tenant on the systems f builds, with order (zero,
// or FairnessKey Tenant): tenant B changes one of its Pool objects every
// 10 ms (NoisyRate) while tenant A inserts Backlog objects at once, until
// the last of them is Done; then B's changes alone, Samples of them.
func RunNoisy(ctx context.Context, f Factory, sz Sizes, order Order) (map[string]float64, error) {
	setup := func() Setup {
		return Setup{Target: NewTarget(sz.Delay, 1, -1), Concurrency: sz.Concurrency, Preload: Pool, Order: order}
	}
	m, err := backlogAndChanges(ctx, f, setup(), sz, NoisyRate)
	if err != nil {
		return nil, err
	}
	if sz.Floor {
		if m[FloorP99], err = floorChanges(ctx, f, setup(), sz, NoisyRate, seconds(m[LoadSeconds])); err != nil {
			return nil, err
		}
	}
	p50, p99, err := changesAlone(ctx, f, setup(), sz, NoisyRate)
	if err != nil {
		return nil, err
	}
	m[AloneP50], m[AloneP99] = p50, p99
	return m, nil
}

// poolIDs is the order in which the changes take the pool's objects.
func poolIDs(rate int) []int {
	return trickle.DistinctIDs(rand.New(rand.NewPCG(Pool, uint64(rate))), Pool, Pool)
}

// start builds and starts a system.
func start(ctx context.Context, f Factory, s Setup) (System, error) {
	sys, err := f(ctx, s)
	if err != nil {
		return nil, err
	}
	if err := sys.Start(ctx); err != nil {
		return nil, err
	}
	runtime.GC()
	return sys, nil
}

// stopped stops sys and joins its error with err.
func stopped(sys System, err error) error {
	if serr := sys.Stop(); serr != nil && err == nil {
		err = fmt.Errorf("stopping: %w", serr)
	}
	return err
}

// insertBacklog inserts objects [from, from+n) with insert (a System's
// Insert or InsertDone), in writes of batch.
func insertBacklog(insert func(from, to int), from, n, batch int) {
	for i := from; i < from+n; i += batch {
		insert(i, min(i+batch, from+n))
	}
}

// seconds is s seconds as a Duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// trickleUntilEnd starts the changes to the pool at rate a second on sys;
// they go on until end is called, which returns their error.
func trickleUntilEnd(ctx context.Context, sys System, rate int) (tr *trickle.Trickle, end func() error) {
	tr = trickle.New(sys, rate, poolIDs(rate))
	stop := make(chan struct{})
	trickled := make(chan error, 1)
	go func() { trickled <- tr.Run(ctx, 0, stop) }()
	return tr, func() error {
		close(stop)
		return <-trickled
	}
}

// backlogAndChanges is phase 1 of startup+changes and noisy-tenant: the
// changes at rate a second during the backlog. It returns the changes'
// latencies (those committed once the backlog's inserts had returned
// apart too: AfterP99), the backlog's duration and the bytes allocated
// meanwhile, and the Updates the target saw.
func backlogAndChanges(ctx context.Context, f Factory, s Setup, sz Sizes, rate int) (map[string]float64, error) {
	sys, err := start(ctx, f, s)
	if err != nil {
		return nil, err
	}
	tr, end := trickleUntilEnd(ctx, sys, rate)
	alloc0, t0 := bench.TotalAlloc(), time.Now()
	insertBacklog(sys.Insert, Pool, sz.Backlog, sz.InsertBatch)
	tr.Mark()
	err = sys.WaitDone(ctx, Pool+sz.Backlog-1, 0)
	load, alloc := time.Since(t0), bench.TotalAlloc()-alloc0
	if terr := end(); err == nil {
		err = terr
	}
	if err == nil {
		err = sys.WaitAll(ctx)
	}
	m := tr.Measure()
	m[LoadSeconds], m[LoadBytes] = load.Seconds(), float64(alloc)
	m["updates"] = float64(s.Target.Updates())
	if err == nil && s.Target.Updates() < int64(sz.Backlog)+int64(m[trickle.Changes]) {
		err = fmt.Errorf("the target saw %d Updates, fewer than the %d objects and %v changes", s.Target.Updates(), sz.Backlog, m[trickle.Changes])
	}
	return m, stopped(sys, err)
}

// floorChanges is phase 1's floor: the same changes while the same
// backlog is inserted already Done, for d (as long as phase 1's backlog
// took, so that the changes made during the inserts weigh as much in the
// p99). The system has nothing to do but read the backlog: the p99 is
// what the inserts alone (the table's write lock, the collector, the
// processors they take) cost the changes, on this machine. It returns
// the changes' p99.
func floorChanges(ctx context.Context, f Factory, s Setup, sz Sizes, rate int, d time.Duration) (float64, error) {
	sys, err := start(ctx, f, s)
	if err != nil {
		return 0, err
	}
	tr, end := trickleUntilEnd(ctx, sys, rate)
	window := time.NewTimer(d)
	insertBacklog(sys.InsertDone, Pool, sz.Backlog, sz.InsertBatch)
	select {
	case <-window.C:
	case <-ctx.Done():
		err = ctx.Err()
	}
	window.Stop()
	if terr := end(); err == nil {
		err = terr
	}
	return tr.Measure()[trickle.P99], stopped(sys, err)
}

// changesAlone is the changes' phase with no backlog: Samples changes at
// rate a second. It returns their p50 and p99.
func changesAlone(ctx context.Context, f Factory, s Setup, sz Sizes, rate int) (p50, p99 float64, err error) {
	sys, err := start(ctx, f, s)
	if err != nil {
		return 0, 0, err
	}
	tr := trickle.New(sys, rate, poolIDs(rate))
	err = tr.Run(ctx, sz.Samples, nil)
	m := tr.Measure()
	return m[trickle.P50], m[trickle.P99], stopped(sys, err)
}

// backlogAlone is the backlog's phase with no changes; it returns how long
// the backlog took, from its first insert until its last object was Done.
func backlogAlone(ctx context.Context, f Factory, s Setup, sz Sizes) (time.Duration, error) {
	sys, err := start(ctx, f, s)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	insertBacklog(sys.Insert, Pool, sz.Backlog, sz.InsertBatch)
	err = sys.WaitDone(ctx, Pool+sz.Backlog-1, 0)
	d := time.Since(t0)
	if err == nil {
		err = sys.WaitAll(ctx)
	}
	return d, stopped(sys, err)
}

// HungOrder is hung-target's Order with a cap of cap operations per
// target (converge's TargetKey and TargetConcurrency).
func HungOrder(t *Target, cap int) Order {
	return Order{TargetKey: t.Key, TargetConcurrency: cap}
}

// RunHung runs hung-target on the systems f builds: HungObjects objects
// over Targets targets, inserted at once, each Update taking Delay and
// those of the last target hanging until the operation timeout
// (HungTimeout), with order(target) as the order (its zero: no cap). It
// counts the healthy targets' successful Updates during HungWindow from
// the first one, then does the same with no target hung.
func RunHung(ctx context.Context, f Factory, sz Sizes, order func(*Target) Order) (map[string]float64, error) {
	m := map[string]float64{}
	for _, hung := range []int{Targets - 1, -1} {
		t := NewTarget(sz.Delay, Targets, hung)
		s := Setup{Target: t, Concurrency: sz.Concurrency, OperationTimeout: sz.HungTimeout, Order: order(t)}
		rate, err := healthyRate(ctx, f, s, sz)
		if err != nil {
			return nil, err
		}
		if hung >= 0 {
			// Read once the system has stopped, which ends every hung
			// Update.
			m[Healthy], m[HungFailed] = rate, float64(t.Failed())
		} else {
			m[HealthyAlone] = rate
		}
	}
	return m, nil
}

// healthyRate is one phase of hung-target: the successful Updates of the
// first Targets-1 targets a second, over the window. The window opens
// when the first Update succeeds: it times the throughput, not how long
// the first operations take to start.
func healthyRate(ctx context.Context, f Factory, s Setup, sz Sizes) (float64, error) {
	sys, err := start(ctx, f, s)
	if err != nil {
		return 0, err
	}
	insertBacklog(sys.Insert, 0, sz.HungObjects, sz.InsertBatch)
	select {
	case <-s.Target.FirstDone():
	case <-ctx.Done():
		return 0, stopped(sys, fmt.Errorf("no Update succeeded: %w", ctx.Err()))
	}
	healthy := func() (n int64) {
		for k := range Targets - 1 {
			n += s.Target.Done(k)
		}
		return n
	}
	before := healthy()
	window := time.NewTimer(sz.HungWindow)
	defer window.Stop()
	select {
	case <-window.C:
	case <-ctx.Done():
		return 0, stopped(sys, ctx.Err())
	}
	after := healthy()
	// Every healthy object Done within the window means the window timed
	// an idle target too: the rate would be too low.
	if limit := int64(sz.HungObjects) * (Targets - 1) / Targets; after >= limit {
		err = fmt.Errorf("all %d healthy objects were Done within the %v window: raise the objects or shorten the window", after, sz.HungWindow)
	}
	return float64(after-before) / sz.HungWindow.Seconds(), stopped(sys, err)
}
