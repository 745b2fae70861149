package reconciler_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// The chaos test's target (chaos_test.go): the faults it injects, the
// counts it keeps, and the checks it makes of every operation it is given.

// faultKind is what the chaotic target does to one operation.
type faultKind int

const (
	faultNone       faultKind = iota
	faultError                // fails with an ordinary error
	faultRetryAfter           // fails with RetryAfter(2ms, err)
	faultLostReply            // applies the change, then fails: the reply was lost
	faultPanic                // panics before applying
	faultHang                 // blocks until its context ends (the operation timeout)
	faultLateFail             // ignores its context, fails after 1.5 timeouts
	faultDefer                // not ready: RetryAfter(2ms, nil), not a failure
	faultSlowOK               // applies after half a timeout
	faultLateOK               // ignores its context, applies after 1.5 timeouts
	numFaultKinds
)

var faultNames = [numFaultKinds]string{
	"none", "error", "retry-after", "lost-reply", "panic", "hang", "late-fail", "defer", "slow-ok", "late-ok",
}

// faultOdds are the chances of each fault; the failures (error through
// late-fail) add up to 30%.
var faultOdds = [numFaultKinds]float64{
	faultError:      0.14,
	faultRetryAfter: 0.03,
	faultLostReply:  0.04,
	faultPanic:      0.03,
	faultHang:       0.04,
	faultLateFail:   0.02,
	faultDefer:      0.02,
	faultSlowOK:     0.04,
	faultLateOK:     0.01,
}

// pickFault chooses the fault of key's n-th operation: a pure function of
// the seed, the key and n, so that a seed replays the same faults whatever
// the order in which keys are reconciled.
//
// An operation without a fault takes up to chaosMaxLatency (honouring its
// context), so that changes often arrive for keys in flight.
func pickFault(seed uint64, key string, n uint64) (faultKind, time.Duration) {
	h := fnv.New64a()
	h.Write([]byte(key))
	x := splitmix64(seed ^ splitmix64(h.Sum64()^splitmix64(n)))
	p := float64(x>>11) / (1 << 53)
	for k := faultError; k < numFaultKinds; k++ {
		if p < faultOdds[k] {
			return k, 0
		}
		p -= faultOdds[k]
	}
	return faultNone, time.Duration(x&0x3ff) * chaosMaxLatency / 0x400
}

// chaosMaxLatency bounds the latency of an operation without a fault.
const chaosMaxLatency = 2 * time.Millisecond

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// opKind counts the operations by kind.
type opKind int

const (
	opUpdate opKind = iota
	opDelete
	opPrune
	opUpdateBatch
	opDeleteBatch
	opSync
	numOpKinds
)

var opNames = [numOpKinds]string{"update", "delete", "prune", "update-batch", "delete-batch", "sync"}

// chaosStats are the counters of one run, or of all runs together.
type chaosStats struct {
	runs        atomic.Int64
	ops         [numOpKinds]atomic.Int64
	faults      [numFaultKinds]atomic.Int64
	changes     atomic.Int64 // table changes made by the driver
	reinserts   atomic.Int64 // of which inserts of keys deleted before
	deletes     atomic.Int64
	fulls       atomic.Int64 // TriggerFullReconciliation calls
	suspends    atomic.Int64
	restarts    atomic.Int64 // hives stopped mid-flight and replaced
	checkpoints atomic.Int64 // convergence checks in the middle of a run
	checked     atomic.Int64 // keys whose final state was checked
	lost        atomic.Int64 // keys whose final state was wrong
	lateStarts  atomic.Int64 // operations that began after Stop was called (with a cancelled context)
	convergeNs  atomic.Int64 // the slowest convergence after the faults stopped
}

func (s *chaosStats) add(o *chaosStats) {
	s.runs.Add(o.runs.Load())
	for i := range s.ops {
		s.ops[i].Add(o.ops[i].Load())
	}
	for i := range s.faults {
		s.faults[i].Add(o.faults[i].Load())
	}
	s.changes.Add(o.changes.Load())
	s.reinserts.Add(o.reinserts.Load())
	s.deletes.Add(o.deletes.Load())
	s.fulls.Add(o.fulls.Load())
	s.suspends.Add(o.suspends.Load())
	s.restarts.Add(o.restarts.Load())
	s.checkpoints.Add(o.checkpoints.Load())
	s.checked.Add(o.checked.Load())
	s.lost.Add(o.lost.Load())
	s.lateStarts.Add(o.lateStarts.Load())
	for {
		cur, d := s.convergeNs.Load(), o.convergeNs.Load()
		if d <= cur || s.convergeNs.CompareAndSwap(cur, d) {
			break
		}
	}
}

func (s *chaosStats) String() string {
	var b strings.Builder
	var ops, faults int64
	for i := range s.ops {
		ops += s.ops[i].Load()
	}
	fmt.Fprintf(&b, "%d run(s); operations attempted %d (", s.runs.Load(), ops)
	for i := range s.ops {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%d", opNames[i], s.ops[i].Load())
	}
	for i := faultError; i < numFaultKinds; i++ {
		faults += s.faults[i].Load()
	}
	fmt.Fprintf(&b, "); faults injected %d (", faults)
	for i := faultError; i < numFaultKinds; i++ {
		if i > faultError {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%d", faultNames[i], s.faults[i].Load())
	}
	fmt.Fprintf(&b, "); table changes %d (deletes %d, re-inserts %d); full triggers %d; suspends %d; "+
		"hive restarts survived %d; convergence checkpoints %d; operations started after Stop was called %d; "+
		"objects checked %d; objects lost %d; slowest convergence %s",
		s.changes.Load(), s.deletes.Load(), s.reinserts.Load(), s.fulls.Load(), s.suspends.Load(),
		s.restarts.Load(), s.checkpoints.Load(), s.lateStarts.Load(), s.checked.Load(), s.lost.Load(),
		time.Duration(s.convergeNs.Load()).Round(time.Millisecond))
	return b.String()
}

// chaosOps are the Operations and BatchOperations of the chaos test: the
// fake target behind testOps, with faults injected at random and checks of
// what the reconciler asks for. They outlive the hives: one target, many
// reconcilers over time.
type chaosOps struct {
	inner *testOps
	seed  uint64
	stats *chaosStats

	faultsOn atomic.Bool
	stopping atomic.Bool // hive.Stop has been called
	down     atomic.Bool // hive.Stop has returned and no new hive runs yet

	mu       sync.Mutex
	attempts map[string]uint64 // operations so far per key ("prune" for Prune)
	running  map[string]int    // operations running per key, whole duration
	updates  int               // Update and Delete operations running
	// hive numbers the hives started (startHive); updatesOf counts the
	// updates running by the hive that started them, so that a broken
	// rule says whether an operation outlived its hive's Stop.
	hive       atomic.Int64
	updatesOf  map[int64]int
	pruning    bool
	pruneEnds  time.Time      // when the running prune is abandoned: its context's deadline
	applied    map[string]int // highest version applied per key
	recent     [8]string      // the keys of the latest operations, a ring
	recentNext int
	problems   []string // broken rules, in the order seen
	prunesOK   int
	pruned     chan struct{} // closed and replaced after each successful Prune
}

func newChaosOps(target *fake.Target, seed uint64, stats *chaosStats) *chaosOps {
	return &chaosOps{
		inner:     &testOps{target: target, getStatus: func(o *testObject) reconciler.Status { return o.Status }},
		seed:      seed,
		stats:     stats,
		attempts:  map[string]uint64{},
		running:   map[string]int{},
		applied:   map[string]int{},
		updatesOf: map[int64]int{},
		pruned:    make(chan struct{}),
	}
}

func (c *chaosOps) problem(format string, args ...any) {
	c.mu.Lock()
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
	c.mu.Unlock()
}

func (c *chaosOps) Problems() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.problems)
}

// begin records the start of an operation and checks the rules about when
// operations may run; it returns the fault to inject.
func (c *chaosOps) begin(ctx context.Context, op opKind, key string, hive int64) (faultKind, time.Duration) {
	c.stats.ops[op].Add(1)
	c.checkStart(ctx, op, key, ctx.Value(inBatchKey{}) == nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	if op == opPrune {
		if c.updates > 0 || c.pruning {
			c.problems = append(c.problems, fmt.Sprintf("prune started (hive %d) while %d update/delete operation(s) ran (pruning=%v; by hive: %v)",
				hive, c.updates, c.pruning, c.updatesOf))
		}
		// The reconciler's clock for the prune started before Prune was
		// called (the deadline of its context), not here: under load the
		// call comes late, and measuring from here would take an update
		// that starts right after the abandon for one that did not wait.
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = time.Now().Add(chaosOpTimeout)
		}
		c.pruning, c.pruneEnds = true, deadline
	} else {
		// A prune past its timeout is abandoned: the reconciler goes on
		// with Update and Delete while it may still run.
		if c.pruning && time.Now().Before(c.pruneEnds) {
			c.problems = append(c.problems, fmt.Sprintf("%s(%s) started while Prune ran", opNames[op], key))
		}
		c.updates++
		c.updatesOf[hive]++
		if c.running[key] > 0 {
			c.problems = append(c.problems, fmt.Sprintf("%s(%s) started while another operation on it ran", opNames[op], key))
		}
	}
	c.running[key]++
	if op != opPrune && op != opSync { // the driver changes object keys only
		c.recent[c.recentNext%len(c.recent)] = key
		c.recentNext++
	}
	n := c.attempts[key]
	c.attempts[key]++
	if !c.faultsOn.Load() {
		return faultNone, 0
	}
	return pickFault(c.seed, key, n)
}

// busyKey returns a key with an operation in flight, else one of the keys
// whose operations started last (likely waiting for their commit), so that
// a change to it tests per-key order. It returns "" before the first
// operation.
func (c *chaosOps) busyKey(pick uint64) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var running []string
	for key, n := range c.running {
		if n > 0 && key != "prune" && key != "sync" {
			running = append(running, key)
		}
	}
	if len(running) > 0 {
		slices.Sort(running) // map order would make the seed's choice random
		return running[pick%uint64(len(running))]
	}
	n := min(c.recentNext, len(c.recent))
	if n == 0 {
		return ""
	}
	return c.recent[(c.recentNext-1-int(pick%uint64(n)))%len(c.recent)]
}

// checkStart checks that no operation starts after hive.Stop returned, and
// counts those that start once Stop was called. An entry of a batch that
// began before Stop is not counted: the batch, not the reconciler, runs it.
func (c *chaosOps) checkStart(ctx context.Context, op opKind, key string, count bool) {
	if c.down.Load() {
		c.problem("%s(%s) started after hive.Stop returned", opNames[op], key)
	}
	if count && c.stopping.Load() && ctx.Err() != nil {
		c.stats.lateStarts.Add(1)
	}
}

// inBatchKey marks the context of the entries of a batch.
type inBatchKey struct{}

func (c *chaosOps) end(op opKind, key string, hive int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running[key]--
	if op == opPrune {
		c.pruning = false
	} else {
		c.updates--
		if c.updatesOf[hive]--; c.updatesOf[hive] == 0 {
			delete(c.updatesOf, hive)
		}
	}
}

// apply records that an operation changed the target for key at version
// and checks that versions never go backwards.
func (c *chaosOps) apply(op opKind, key string, version int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if last := c.applied[key]; version < last {
		c.problems = append(c.problems, fmt.Sprintf("%s(%s) applied version %d after version %d", opNames[op], key, version, last))
	}
	c.applied[key] = max(c.applied[key], version)
}

// do runs one operation with its fault. call performs it on the fake target.
func (c *chaosOps) do(ctx context.Context, op opKind, key string, version int, call func(context.Context) error) (err error) {
	hive := c.hive.Load()
	fault, latency := c.begin(ctx, op, key, hive)
	defer c.end(op, key, hive)
	c.stats.faults[fault].Add(1)
	tgt := c.inner.target
	switch fault {
	case faultNone:
		if latency > 0 {
			timer := time.NewTimer(latency)
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				return ctx.Err()
			}
		}
	case faultError:
		tgt.SetFault(key, fake.Fault{Mode: fake.ModeError, Count: 1})
	case faultRetryAfter:
		tgt.SetFault(key, fake.Fault{Mode: fake.ModeRetryAt, Count: 1, After: 2 * time.Millisecond})
	case faultPanic:
		tgt.SetFault(key, fake.Fault{Mode: fake.ModePanic, Count: 1})
	case faultHang:
		tgt.SetFault(key, fake.Fault{Mode: fake.ModeHang, Count: 1})
	case faultDefer:
		tgt.SetFault(key, fake.Fault{Mode: fake.ModeDefer, Count: 1, After: 2 * time.Millisecond})
	case faultLateFail:
		time.Sleep(chaosOpTimeout * 3 / 2)
		return fmt.Errorf("%s(%s): failed late, context ignored", opNames[op], key)
	case faultSlowOK:
		time.Sleep(chaosOpTimeout / 2)
	case faultLateOK:
		time.Sleep(chaosOpTimeout * 3 / 2)
	}
	err = call(ctx)
	if err == nil {
		c.apply(op, key, version)
		if op == opPrune || op == opSync {
			// A Sync, like a prune, removes what is not desired.
			c.mu.Lock()
			c.prunesOK++
			close(c.pruned)
			c.pruned = make(chan struct{})
			c.mu.Unlock()
		}
		if fault == faultLostReply {
			return fmt.Errorf("%s(%s): applied, but the reply was lost", opNames[op], key)
		}
	}
	return err
}
