// Package trickle writes single-object changes to a system under test at a
// fixed rate and measures each one's latency: from just before its commit
// until an observer sees the object Done at the change's version or later.
// The benchmarks of the core module and of the nested benchmark modules
// share it, so that every side of a comparison is driven alike.
package trickle

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Metric names in what Measure and Latencies return. Latencies are in
// milliseconds.
const (
	P50        = "p50"
	P99        = "p99"
	Max        = "max"
	FromDueP50 = "from-due-p50"
	FromDueP99 = "from-due-p99"
	Changes    = "changes"
	Waits      = "waits"
	// AfterP99 is the p99 of the changes committed after Mark, when it
	// was called: a workload's phases told apart (a burst's inserts,
	// then its reconciliation).
	AfterP99     = "after-mark-p99"
	AfterChanges = "after-mark-changes"
)

// Changer is what a trickle drives: a table with a reconciler, or a queue
// with its workers.
type Changer interface {
	// Touch changes object id (a new value, marked for reconciliation)
	// and returns the change's version and the time taken just before
	// the change was committed.
	Touch(id int) (version uint64, at time.Time)
	// WaitDone waits until object id is Done at a version after
	// version, or ctx ends.
	WaitDone(ctx context.Context, id int, version uint64) error
}

// Trickle writes single-object changes at a fixed rate and measures each
// one's latency.
//
// It is open loop: change i is due at start + i/rate whether or not the
// earlier ones are Done, and a change written late (the writer was not
// scheduled in time) is written at once, with the later ones still due on
// the original schedule, so that the rate does not drift. Go's timers
// wake with about a millisecond's slack on Linux, so at 2000/s changes
// often go out in pairs; the average rate holds, and every side gets the
// same schedule.
//
// Each change has its own observer goroutine asleep in Changer.WaitDone
// (on the object's watch channel, for a table). It costs a lookup when the
// change commits and one when the status is written, and nothing for the
// other objects' writes. A change iterator would wake on every commit and
// read every changed object, a bulk load's too, taking CPU from every side
// on a small machine.
type Trickle struct {
	c    Changer
	rate int
	free chan int // objects with no change in flight, longest idle first

	timer *time.Timer
	lag   []float64 // per change, how late it was written, in ms
	waits int       // changes that found every object in flight

	observers  sync.WaitGroup
	mu         sync.Mutex
	lat        []float64 // per change, its latency in ms
	latFromDue []float64 // per change, ms from due to Done: latency plus the waits for the writer and the write lock
	err        error     // the first observer's error
	mark       time.Time // set by Mark
	latAfter   []float64 // per change committed after mark, its latency in ms
}

// Mark splits the changes in two: Measure reports the p99 of those
// committed after now apart (AfterP99) as well.
func (t *Trickle) Mark() {
	now := time.Now()
	t.mu.Lock()
	t.mark = now
	t.mu.Unlock()
}

// New returns a trickle of rate changes per second to the objects ids,
// which are taken in turn: a change takes the object idle for longest, so
// two changes in flight never hit one object.
func New(c Changer, rate int, ids []int) *Trickle {
	t := &Trickle{c: c, rate: rate, free: make(chan int, len(ids)), timer: time.NewTimer(time.Hour)}
	t.timer.Stop()
	for _, id := range ids {
		t.free <- id
	}
	return t
}

// Run writes changes on schedule until it has written n (no limit if n is
// 0), stop is closed or ctx ends, then waits until every change it wrote
// has been observed Done. The schedule starts when Run does, and its first
// change, due then, is always written: a load can end before Run's
// goroutine is first scheduled, and a run without a change has nothing to
// measure. It returns an observer's error or ctx's. Run may be called
// again; the measurements add up.
func (t *Trickle) Run(ctx context.Context, n int, stop <-chan struct{}) error {
	start := time.Now()
	for i := 0; n <= 0 || i < n; i++ {
		due := start.Add(time.Duration(i) * time.Second / time.Duration(t.rate))
		if i > 0 && !t.sleepUntil(ctx, stop, due) {
			break
		}
		id, ok := t.take(ctx)
		if !ok {
			break
		}
		t.lag = append(t.lag, MillisSince(due))
		version, t0 := t.c.Touch(id)
		t.observers.Add(1)
		go t.observe(ctx, id, version, due, t0)
	}
	t.observers.Wait()
	if t.err != nil {
		return t.err
	}
	return ctx.Err()
}

// sleepUntil sleeps until due, and reports whether to go on: false once
// stop is closed or ctx has ended.
func (t *Trickle) sleepUntil(ctx context.Context, stop <-chan struct{}, due time.Time) bool {
	d := time.Until(due)
	if d <= 0 {
		select {
		case <-stop:
			return false
		case <-ctx.Done():
			return false
		default:
			return true
		}
	}
	t.timer.Reset(d)
	defer t.timer.Stop()
	select {
	case <-t.timer.C:
		return true
	case <-stop:
		return false
	case <-ctx.Done():
		return false
	}
}

// take returns the object idle for longest, waiting for one if every
// object has a change in flight (counted in waits: the trickle is then
// closed loop, and the rate too high for the pool). It returns false if
// ctx ends first.
func (t *Trickle) take(ctx context.Context) (int, bool) {
	select {
	case id := <-t.free:
		return id, true
	default:
	}
	t.waits++
	select {
	case id := <-t.free:
		return id, true
	case <-ctx.Done():
		return 0, false
	}
}

// observe waits until object id is Done at a version after the change's
// (at version itself it is marked for reconciliation), records the
// latency of the change committed at t0 and due at due, and frees the
// object.
func (t *Trickle) observe(ctx context.Context, id int, version uint64, due, t0 time.Time) {
	defer t.observers.Done()
	err := t.c.WaitDone(ctx, id, version)
	ms, fromDue := MillisSince(t0), MillisSince(due)
	t.mu.Lock()
	if err != nil && t.err == nil {
		t.err = err
	}
	t.lat = append(t.lat, ms)
	t.latFromDue = append(t.latFromDue, fromDue)
	if !t.mark.IsZero() && t0.After(t.mark) {
		t.latAfter = append(t.latAfter, ms)
	}
	t.mu.Unlock()
	t.free <- id
}

// Measure summarizes every change Run has written: the latencies' p50,
// p99 and maximum; the same percentiles counted from when each change was
// due; and, for a progress log, how late the writes were and how many
// changes waited for an object. Call it after Run has returned.
func (t *Trickle) Measure() map[string]float64 {
	m := Latencies(t.lat)
	m[Changes] = float64(len(t.lat))
	fromDue := Latencies(t.latFromDue)
	m[FromDueP50], m[FromDueP99] = fromDue[P50], fromDue[P99]
	lag := Latencies(t.lag)
	m["late-p50-ms"], m["late-p99-ms"] = lag[P50], lag[P99]
	m[Waits] = float64(t.waits)
	if !t.mark.IsZero() {
		m[AfterP99], m[AfterChanges] = Latencies(t.latAfter)[P99], float64(len(t.latAfter))
	}
	return m
}

// Latencies summarizes latencies in milliseconds: p50, p99 and the
// maximum, nearest-rank; NaN for none. It sorts lat.
func Latencies(lat []float64) map[string]float64 {
	slices.Sort(lat)
	return map[string]float64{P50: Percentile(lat, 50), P99: Percentile(lat, 99), Max: Percentile(lat, 100)}
}

// Percentile p (0-100) of sorted, nearest-rank; NaN when sorted is empty.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// MillisSince is the time since t0 in milliseconds, the unit of latencies.
func MillisSince(t0 time.Time) float64 {
	return float64(time.Since(t0)) / float64(time.Millisecond)
}

// DistinctIDs returns k distinct objects of [0, n) in random order. It
// samples rather than permuting [0, n), which for a large table would
// allocate the whole range to use a thousand of it.
func DistinctIDs(rnd *rand.Rand, n, k int) []int {
	seen := make(map[int]bool, k)
	ids := make([]int, 0, k)
	for len(ids) < k {
		if id := rnd.IntN(n); !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}
