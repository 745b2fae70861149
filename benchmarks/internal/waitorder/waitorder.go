// Package waitorder holds the workloads that measure the order in which
// waiting work is taken: startup+changes (a backlog of low-priority
// objects while high-priority changes keep arriving), noisy-tenant (one
// tenant's burst while another tenant's changes trickle in) and
// hung-target (one of four targets hangs until its operations time out).
//
// A workload drives a System: converge's reconciler (NewConverge),
// statedb's (NewStatedb), or, in the nested benchmark module that links
// it, controller-runtime's priority queue with workers. The core
// benchmarks and the nested module run the same workloads through this
// package, so every side is driven alike.
package waitorder

import (
	"context"
	"time"

	"github.com/converge-go/converge/benchmarks/internal/trickle"
)

// System is one reconciler, or one queue and its workers, under test,
// built fresh for each phase of a run by a Factory. Its objects are
// numbered; object id's operations go to Setup.Target.
type System interface {
	// Touch gives object id a new value and marks it for
	// reconciliation; WaitDone waits for that to be Done.
	trickle.Changer
	// Start starts the system. Objects [0, Setup.Preload) exist and are
	// Done before it starts.
	Start(ctx context.Context) error
	// Insert adds objects [from, to) as new work in one write: one
	// write transaction for a table, one Add for a queue.
	Insert(from, to int)
	// InsertDone adds objects [from, to) already Done, in a write like
	// Insert's: the system reads them and has nothing to do. What the
	// changes wait then is the inserts' own share (FloorP99).
	InsertDone(from, to int)
	// WaitAll waits until no object has work outstanding, or ctx ends.
	WaitAll(ctx context.Context) error
	// Stop stops the system; in-flight operations see their context
	// cancelled, and no goroutine of the system survives.
	Stop() error
}

// Factory builds a System for one phase of a run; ctx carries the run's
// profiler labels.
type Factory func(ctx context.Context, s Setup) (System, error)

// Setup is what a workload asks of a System.
type Setup struct {
	Target           *Target
	Concurrency      int           // operations at once
	OperationTimeout time.Duration // 0: none
	Preload          int           // objects [0, Preload) exist, Done, before Start
	Order            Order         // zero: the system's default order
}

// Order is how a system orders its waiting work, as functions of the
// object's number. The zero Order is the system's own default (first in,
// first out for every side here).
type Order struct {
	// Priority: higher first (converge's Config.Priority,
	// controller-runtime's AddOpts.Priority).
	Priority func(id uint64) int
	// FairnessKey: round-robin across keys within a priority.
	FairnessKey func(id uint64) string
	// TargetKey and TargetConcurrency: at most TargetConcurrency
	// operations per target key at once.
	TargetKey         func(id uint64) string
	TargetConcurrency int
}

// IsZero reports whether o asks for nothing but the default order.
func (o Order) IsZero() bool {
	return o.Priority == nil && o.FairnessKey == nil && o.TargetKey == nil && o.TargetConcurrency == 0
}

// Sizes are the knobs of the workloads.
type Sizes struct {
	Backlog     int           // startup+changes: objects inserted at start; noisy-tenant: tenant A's burst
	Samples     int           // changes measured with no backlog
	InsertBatch int           // objects per insert (write transaction, Add)
	Delay       time.Duration // how long each Update takes
	Concurrency int           // operations at once, on every side
	HungObjects int           // hung-target: objects, spread over the four targets
	HungWindow  time.Duration // hung-target: how long the throughput is measured
	HungTimeout time.Duration // hung-target: the operation timeout that ends a hung Update
	// Floor: startup+changes and noisy-tenant also run the changes while
	// the backlog is inserted already Done (FloorP99), as long as the
	// backlog took. It costs a run of that length.
	Floor bool
}

// The workloads' fixed shapes.
const (
	// Pool is how many objects the changes are made to: the
	// high-priority objects of startup+changes, tenant B's of
	// noisy-tenant. They exist, Done, before a run starts. A change takes
	// the object idle for longest, and there are enough for 25 s of
	// changes at 200/s: first in, first out, a change waits for the whole
	// backlog (8 s at 100k), and with too few objects the changes would
	// wait for one to be free instead.
	Pool = 5000
	// StartupRate is startup+changes' changes per second.
	StartupRate = 200
	// NoisyRate is noisy-tenant's tenant B's changes per second: one
	// every 10 ms.
	NoisyRate = 100
	// Targets is hung-target's number of targets; the last one hangs.
	Targets = 4
)

// FullSizes are the sizes: a 100k backlog.
func FullSizes() Sizes {
	return Sizes{
		Backlog:     100_000,
		Samples:     500,
		InsertBatch: 1000,
		Delay:       time.Millisecond,
		Concurrency: 16,
		HungObjects: 64_000,
		HungWindow:  2 * time.Second,
		HungTimeout: 200 * time.Millisecond,
	}
}

// QuickSizes shrink the workloads to about 40 s for the three, 3 pairs of
// runs each, on 2 cores.
func QuickSizes() Sizes {
	s := FullSizes()
	s.Backlog, s.Samples = 10_000, 100
	s.HungObjects, s.HungWindow = 8000, 250*time.Millisecond
	return s
}

// TinySizes make every workload run in well under a second, even with
// -race: enough for a test to exercise the workloads, far too little to
// time anything. The hung window is shorter than the healthy objects can
// be Done in (16 workers, 1 ms each), so it never runs out of work.
func TinySizes() Sizes {
	s := FullSizes()
	s.Backlog, s.Samples = 300, 10
	s.HungObjects, s.HungWindow, s.HungTimeout = 4000, 50*time.Millisecond, 20*time.Millisecond
	return s
}
