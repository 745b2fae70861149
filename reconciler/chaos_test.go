package reconciler_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"iter"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/hive/hivetest"
	"github.com/cilium/statedb"
	"go.uber.org/goleak"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// The chaos test drives a reconciler with thousands of random table
// changes, suspends, full-reconciliation triggers and restarts of the whole
// hive, over a target that fails, panics, hangs and answers slowly at
// random. Each value carries the key's version ("v7"), which only grows.
//
// Whenever the faults stop (at random checkpoints and at the end), the
// world must converge within chaosConvergeBound: the target equals the
// table, every object is Done, every deleted key is gone. Throughout, the
// operations check that no version older than one already applied is ever
// applied, that no two operations on a key overlap, that Prune never runs
// beside Update or Delete, and that nothing starts after hive.Stop
// returned; after each Stop, that stopped hive's table must never change.
//
// A seed fixes the driver's sequence of changes and the faults each key's
// n-th operation meets. The interleaving with the reconciler's goroutines
// still depends on timing, so a seed replays the same storm, not the same
// schedule; failing seeds are still worth re-running a few times.
//
//	CONVERGE_SEED=123 go test -race -run 'TestChaos/^c16$/' ./reconciler  # replay one seed
//	CONVERGE_SOAK=10m go test -race -run TestChaos -timeout 0 ./reconciler  # soak with fresh seeds
//	CONVERGE_CHAOS_LOG=1 ...                                             # show the hive's logs

const (
	// chaosKeys is the key space: small, so that keys are updated, deleted
	// and re-inserted while their previous operation is still in flight.
	chaosKeys = 100

	// chaosOpTimeout is Config.OperationTimeout; hangs and slow operations
	// are measured against it.
	chaosOpTimeout = 20 * time.Millisecond

	// chaosConvergeBound is how long the world may take to match the table
	// after the faults stop: a full reconciliation (drain, prune), then the
	// retries, whose backoff is at most 20ms. Typical runs take tens of
	// milliseconds; the bound leaves room for -race on a loaded machine.
	chaosConvergeBound = 5 * time.Second

	// chaosStopBound is how long hive.Stop may take: in-flight operations
	// see a cancelled context, and the slowest one that ignores it ends
	// after 1.5 * chaosOpTimeout.
	chaosStopBound = 10 * time.Second
)

// chaosConfig is one reconciler configuration the storm runs against.
type chaosConfig struct {
	name        string
	concurrency int
	batch       bool
	sync        bool // whole set: SyncOperations
}

var chaosConfigs = []chaosConfig{
	{name: "c1", concurrency: 1},
	{name: "c16", concurrency: 16},
	{name: "batch-c1", concurrency: 1, batch: true},
	{name: "batch-c16", concurrency: 16, batch: true},
	{name: "sync", sync: true},
}

// chaosCISeeds run on every `go test`: each under every configuration.
var chaosCISeeds = []uint64{1, 2, 3, 4}

// chaosSteps is the number of driver steps of one run (most steps write a
// transaction of one to four changes).
const (
	chaosSteps     = 3500
	chaosSoakSteps = 4000
)

func TestChaos(t *testing.T) {
	seeds, steps := chaosCISeeds, chaosSteps
	if testing.Short() {
		seeds = seeds[:1]
	}
	var soak time.Duration
	if s := os.Getenv("CONVERGE_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("CONVERGE_SOAK=%q: %s", s, err)
		}
		soak, steps = d, chaosSoakSteps
	}
	if s := os.Getenv("CONVERGE_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CONVERGE_SEED=%q: %s", s, err)
		}
		seeds, soak = []uint64{seed}, 0
	}
	leaks := goleak.IgnoreCurrent()
	total := &chaosStats{}
	start := time.Now()
	run := func(cc chaosConfig, seed uint64) bool {
		return t.Run(fmt.Sprintf("%s/seed=%d", cc.name, seed), func(t *testing.T) {
			runChaos(t, cc, seed, steps, total)
		})
	}
	if soak > 0 {
		deadline := start.Add(soak)
		seed := uint64(time.Now().UnixNano()) % 1_000_000_000
		for i := 0; time.Now().Before(deadline); i++ {
			if !run(chaosConfigs[i%len(chaosConfigs)], seed+uint64(i/len(chaosConfigs))) {
				break // the failing seed is printed; stop the soak there
			}
		}
	} else {
		for _, seed := range seeds {
			for _, cc := range chaosConfigs {
				run(cc, seed)
			}
		}
	}
	t.Logf("all runs in %s: %s", time.Since(start).Round(time.Millisecond), total)
	if total.lost.Load() != 0 {
		t.Errorf("%d object(s) lost", total.lost.Load())
	}
	goleak.VerifyNone(t, leaks)
}

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

	mu         sync.Mutex
	attempts   map[string]uint64 // operations so far per key ("prune" for Prune)
	running    map[string]int    // operations running per key, whole duration
	updates    int               // Update and Delete operations running
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
		inner:    &testOps{target: target, getStatus: func(o *testObject) reconciler.Status { return o.Status }},
		seed:     seed,
		stats:    stats,
		attempts: map[string]uint64{},
		running:  map[string]int{},
		applied:  map[string]int{},
		pruned:   make(chan struct{}),
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
func (c *chaosOps) begin(ctx context.Context, op opKind, key string) (faultKind, time.Duration) {
	c.stats.ops[op].Add(1)
	c.checkStart(ctx, op, key, ctx.Value(inBatchKey{}) == nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	if op == opPrune {
		if c.updates > 0 || c.pruning {
			c.problems = append(c.problems, fmt.Sprintf("prune started while %d update/delete operation(s) ran (pruning=%v)", c.updates, c.pruning))
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

func (c *chaosOps) end(op opKind, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running[key]--
	if op == opPrune {
		c.pruning = false
	} else {
		c.updates--
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
	fault, latency := c.begin(ctx, op, key)
	defer c.end(op, key)
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

// PrunesOK returns the number of successful prunes so far, and a channel
// that closes at the next one.
func (c *chaosOps) PrunesOK() (int, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.prunesOK, c.pruned
}

func (c *chaosOps) Update(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	return c.do(ctx, opUpdate, obj.ID, chaosVersion(obj), func(ctx context.Context) error {
		return c.inner.Update(ctx, txn, rev, obj)
	})
}

func (c *chaosOps) Delete(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	return c.do(ctx, opDelete, obj.ID, chaosVersion(obj), func(ctx context.Context) error {
		return c.inner.Delete(ctx, txn, rev, obj)
	})
}

func (c *chaosOps) Prune(ctx context.Context, txn statedb.ReadTxn, objs iter.Seq2[*testObject, statedb.Revision]) error {
	return c.do(ctx, opPrune, "prune", 0, func(ctx context.Context) error {
		return c.inner.Prune(ctx, txn, objs)
	})
}

// UpdateBatch and DeleteBatch run the entries one by one, each with its own
// fault: a panic fails the rest of the batch, and a hang uses up the
// batch's timeout.
func (c *chaosOps) UpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*testObject]) {
	c.stats.ops[opUpdateBatch].Add(1)
	c.checkStart(ctx, opUpdateBatch, "", true)
	eachEntry(context.WithValue(ctx, inBatchKey{}, true), txn, batch, c.Update)
}

func (c *chaosOps) DeleteBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*testObject]) {
	c.stats.ops[opDeleteBatch].Add(1)
	c.checkStart(ctx, opDeleteBatch, "", true)
	eachEntry(context.WithValue(ctx, inBatchKey{}, true), txn, batch, c.Delete)
}

// chaosVersion is the per-key version the driver encodes in Value ("v7").
func chaosVersion(o *testObject) int {
	v, err := strconv.Atoi(strings.TrimPrefix(o.Value, "v"))
	if err != nil {
		panic(fmt.Sprintf("object %s has value %q, not a version", o.ID, o.Value))
	}
	return v
}

// chaosModel is the source of truth the driver keeps beside the table, and
// from which the table is rebuilt after a restart.
type chaosModel struct {
	version map[string]int  // the latest version of each key ever written
	live    map[string]bool // the keys desired now
}

func (m *chaosModel) value(key string) string { return "v" + strconv.Itoa(m.version[key]) }

// chaosRun is one run: one seed, one configuration, several hives.
type chaosRun struct {
	t      *testing.T
	cc     chaosConfig
	seed   uint64
	rng    *rand.Rand
	log    *slog.Logger
	stats  *chaosStats
	target *fake.Target
	ops    *chaosOps
	model  chaosModel

	// Tuning drawn from the seed.
	roundSize    int
	fullInterval time.Duration
	refresh      time.Duration

	f         *fixture
	r         reconciler.Reconciler[*testObject]
	suspended bool

	// stopped are the tables of the hives stopped so far, with their
	// revision when Stop returned: nothing may change them afterwards.
	stopped []stoppedTable
}

type stoppedTable struct {
	db    *statedb.DB
	table statedb.RWTable[*testObject]
	rev   statedb.Revision
}

func runChaos(t *testing.T, cc chaosConfig, seed uint64, steps int, total *chaosStats) {
	stats := &chaosStats{}
	stats.runs.Store(1)
	defer func() {
		t.Logf("%s", stats)
		total.add(stats)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay: CONVERGE_SEED=%d go test -race -count=1 -run 'TestChaos/^%s$/' ./reconciler", seed, cc.name)
		}
	})

	target := fake.New(wrappers)
	c := &chaosRun{
		t:      t,
		cc:     cc,
		seed:   seed,
		rng:    rand.New(rand.NewPCG(seed, 0x636f6e7665726765)),
		log:    slog.New(slog.DiscardHandler),
		stats:  stats,
		target: target,
		ops:    newChaosOps(target, seed, stats),
		model:  chaosModel{version: map[string]int{}, live: map[string]bool{}},
	}
	if os.Getenv("CONVERGE_CHAOS_LOG") != "" {
		c.log = hivetest.Logger(t)
	}
	c.roundSize = []int{0, 7, 32}[c.rng.IntN(3)]
	c.fullInterval = time.Duration(50+c.rng.IntN(150)) * time.Millisecond
	c.refresh = []time.Duration{reconciler.Off, 50 * time.Millisecond}[c.rng.IntN(2)]
	t.Logf("concurrency %d, batch %v, round size %d, full reconciliation every %s, refresh %s",
		cc.concurrency, cc.batch, c.roundSize, c.fullInterval, c.refresh)
	t.Cleanup(func() {
		if c.f != nil {
			c.stopHive() // after a failure: leave no hive running
		}
	})

	c.ops.faultsOn.Store(true)
	c.startHive()
	restartOdds := 4.0 / float64(steps) // about four restarts a run
	checkOdds := 10.0 / float64(steps)  // and ten checkpoints
	for range steps {
		switch p := c.rng.Float64(); {
		case p < checkOdds:
			// A checkpoint: stop the faults, check that the world
			// converges, and let the storm go on.
			c.ops.faultsOn.Store(false)
			c.converge()
			c.stats.checkpoints.Add(1)
			c.ops.faultsOn.Store(true)
		case p < checkOdds+restartOdds:
			c.stopHive()
			c.stats.restarts.Add(1)
			c.startHive()
		case p < 0.01: // a full reconciliation drains the operations in flight: not too often
			c.r.TriggerFullReconciliation()
			c.stats.fulls.Add(1)
		case p < 0.015:
			if !c.suspended {
				c.r.Suspend()
				c.suspended = true
				c.stats.suspends.Add(1)
			}
		case p < 0.035:
			if c.suspended {
				c.r.Resume()
				c.suspended = false
			}
		case p < 0.25:
			time.Sleep(time.Duration(c.rng.Int64N(int64(2 * time.Millisecond))))
		default:
			c.write(1 + c.rng.IntN(4))
		}
		if t.Failed() {
			return
		}
	}

	// The storm is over: the world must now converge, and stay converged.
	c.ops.faultsOn.Store(false)
	c.converge()
	c.stopHive()
	c.check()
}

// startHive builds a new hive over the same target and rebuilds the table
// from the model, as an agent does after a crash: everything desired is
// inserted again (Pending, with or without a status set), then the table
// is marked initialized so the full reconciliation prunes what vanished.
func (c *chaosRun) startHive() {
	t := c.t
	// The number of draws depends on the table's size: use a stream of
	// their own, so the driver's stays aligned.
	rng := rand.New(rand.NewPCG(c.seed, uint64(len(c.stopped))+1))
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.hive.Start(c.log, ctx); err != nil {
		t.Fatalf("hive start: %s", err)
	}
	c.f = f
	c.ops.down.Store(false)
	c.ops.stopping.Store(false)

	construct := func() {
		cfg := testConfig(f, c.ops, reconciler.Config[*testObject]{
			RoundSize:                  c.roundSize,
			Concurrency:                c.cc.concurrency,
			OperationTimeout:           chaosOpTimeout,
			RetryBackoffMin:            time.Millisecond,
			RetryBackoffMax:            20 * time.Millisecond,
			FullReconciliationInterval: c.fullInterval,
			RefreshInterval:            c.refresh,
			RefreshRateLimiter:         rate.NewLimiter(rate.Inf, 1),
			StartSuspended:             c.suspended, // a follower stays one across the restart
		})
		if c.cc.batch {
			cfg.BatchOperations = c.ops
		}
		if c.cc.sync {
			syncChaosConfig(&cfg, c.ops)
		}
		r, err := reconciler.New(cfg, f.params)
		if err != nil {
			t.Fatalf("reconciler.New: %s", err)
		}
		c.r = r
	}
	rebuild := func() {
		wtxn := f.db.WriteTxn(f.table)
		for _, key := range slices.Sorted(maps.Keys(c.model.live)) {
			if !c.model.live[key] {
				continue
			}
			obj := &testObject{ID: key, Value: c.model.value(key)}
			if rng.IntN(2) == 0 {
				obj.Status = reconciler.StatusPending()
			}
			if _, _, err := f.table.Insert(wtxn, obj); err != nil {
				t.Fatalf("insert: %s", err)
			}
		}
		wtxn.Commit()
		f.markInit()
	}
	// Agents do both: construct first and fill the table later, or the
	// other way round.
	if rng.IntN(2) == 0 {
		construct()
		rebuild()
	} else {
		rebuild()
		construct()
	}
}

// stopHive stops the running hive, checking that Stop returns in time.
func (c *chaosRun) stopHive() {
	t, f := c.t, c.f
	c.f = nil
	c.ops.stopping.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), chaosStopBound)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.hive.Stop(c.log, ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("hive stop: %s", err)
		}
	case <-time.After(chaosStopBound + time.Second):
		t.Fatalf("hive.Stop did not return within %s", chaosStopBound)
	}
	c.ops.down.Store(true)
	c.stopped = append(c.stopped, stoppedTable{db: f.db, table: f.table, rev: f.table.Revision(f.db.ReadTxn())})
}

// write commits one transaction of n random changes: updates and deletes
// of live keys, inserts and re-inserts of the others.
func (c *chaosRun) write(n int) {
	f := c.f
	wtxn := f.db.WriteTxn(f.table)
	for range n {
		// Every change draws the same numbers, so the seed's stream
		// stays aligned whatever key the timing-dependent busyKey picks.
		key := fmt.Sprintf("k%03d", c.rng.IntN(chaosKeys))
		pick, del, unset := c.rng.Uint64(), c.rng.IntN(100) < 45, c.rng.IntN(4) == 0
		if pick%3 == 0 {
			// A third of the changes hit keys that are likely busy.
			if k := c.ops.busyKey(pick / 3); k != "" {
				key = k
			}
		}
		c.stats.changes.Add(1)
		if c.model.live[key] && del {
			if _, _, err := f.table.Delete(wtxn, &testObject{ID: key}); err != nil {
				c.t.Fatalf("delete: %s", err)
			}
			c.model.live[key] = false
			c.stats.deletes.Add(1)
			continue
		}
		if _, seen := c.model.version[key]; seen && !c.model.live[key] {
			c.stats.reinserts.Add(1)
		}
		c.model.version[key]++
		c.model.live[key] = true
		obj := &testObject{ID: key, Value: c.model.value(key), Status: reconciler.StatusPending()}
		if unset {
			obj.Status = reconciler.Status{} // an unset status is Pending too
		}
		if _, _, err := f.table.Insert(wtxn, obj); err != nil {
			c.t.Fatalf("insert: %s", err)
		}
	}
	wtxn.Commit()
}

// converge waits, within chaosConvergeBound of the faults stopping, for a
// successful prune, for every change to settle, and for the table and the
// target to match the model with every object Done.
func (c *chaosRun) converge() {
	t, f := c.t, c.f
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), chaosConvergeBound)
	defer cancel()
	if c.suspended {
		c.r.Resume()
		c.suspended = false
	}

	// Keys deleted while the hive was down are known only to the target:
	// only a prune removes them. Ask for one that runs without faults.
	prunes, pruned := c.ops.PrunesOK()
	c.r.TriggerFullReconciliation()
	for n := prunes; n == prunes; n, pruned = c.ops.PrunesOK() {
		select {
		case <-pruned:
		case <-ctx.Done():
			t.Fatalf("no successful prune within %s of the faults stopping; status: %+v", chaosConvergeBound, c.r.Status())
		}
	}

	if err := c.r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatalf("changes did not settle within %s of the faults stopping: %s; status: %+v", chaosConvergeBound, err, c.r.Status())
	}
	for {
		changed := c.target.Changed()
		objs, watch := f.table.AllWatch(f.db.ReadTxn())
		diffs := c.diff(objs, c.target.State(), true)
		if len(diffs) == 0 {
			break
		}
		select {
		case <-watch:
		case <-changed:
		case <-ctx.Done():
			c.stats.lost.Add(int64(len(diffs)))
			t.Fatalf("not converged within %s of the faults stopping; %d difference(s), first: %s; status: %+v",
				chaosConvergeBound, len(diffs), strings.Join(diffs[:min(len(diffs), 10)], "; "), c.r.Status())
		}
	}
	d := time.Since(start)
	if int64(d) > c.stats.convergeNs.Load() {
		c.stats.convergeNs.Store(int64(d))
	}
	c.stats.checked.Add(int64(len(c.model.version)))
}

// diff lists how the table (when given) and the target differ from the
// model.
func (c *chaosRun) diff(objs iter.Seq2[*testObject, statedb.Revision], state map[string]string, withTable bool) []string {
	var diffs []string
	if withTable {
		inTable := map[string]bool{}
		for obj := range objs {
			inTable[obj.ID] = true
			switch {
			case !c.model.live[obj.ID]:
				diffs = append(diffs, fmt.Sprintf("%s in the table but deleted", obj.ID))
			case obj.Value != c.model.value(obj.ID):
				diffs = append(diffs, fmt.Sprintf("%s=%s in the table, want %s", obj.ID, obj.Value, c.model.value(obj.ID)))
			case obj.Status.Kind != reconciler.StatusKindDone:
				diffs = append(diffs, fmt.Sprintf("%s is %s (%s)", obj.ID, obj.Status.Kind, obj.Status.Error))
			}
		}
		for key, live := range c.model.live {
			if live && !inTable[key] {
				diffs = append(diffs, fmt.Sprintf("%s missing from the table", key))
			}
		}
	}
	for key := range c.model.version {
		got, ok := state[key]
		switch {
		case c.model.live[key] && !ok:
			diffs = append(diffs, fmt.Sprintf("%s missing from the target, want %s", key, c.model.value(key)))
		case c.model.live[key] && got != c.model.value(key):
			diffs = append(diffs, fmt.Sprintf("%s=%s in the target, want %s", key, got, c.model.value(key)))
		case !c.model.live[key] && ok:
			diffs = append(diffs, fmt.Sprintf("%s=%s in the target, but deleted", key, got))
		}
	}
	for key := range state {
		if _, known := c.model.version[key]; !known {
			diffs = append(diffs, fmt.Sprintf("%s in the target, never desired", key))
		}
	}
	return diffs
}

// check is the verdict after the last hive stopped: the target still
// matches the model, no rule was broken, and no stopped hive's table
// changed after its Stop returned.
func (c *chaosRun) check() {
	t := c.t
	diffs := c.diff(nil, c.target.State(), false)
	c.stats.lost.Add(int64(len(diffs)))
	if len(diffs) > 0 {
		t.Errorf("after the last Stop, %d key(s) differ: %s", len(diffs), strings.Join(diffs[:min(len(diffs), 10)], "; "))
	}
	for _, p := range c.ops.Problems() {
		t.Errorf("rule broken: %s", p)
	}
	if o := c.target.Overlaps(); len(o) > 0 {
		t.Errorf("overlapping operations on %v", o)
	}
	for i, s := range c.stopped {
		if rev := s.table.Revision(s.db.ReadTxn()); rev != s.rev {
			t.Errorf("hive %d: table changed after Stop returned: revision %d, was %d", i, rev, s.rev)
		}
	}
}

// TestStuckOperationDoesNotStallFullReconciliation: an operation that
// ignores its context must harm only its own object. The worker hand-off
// keeps the other objects flowing past it; a full reconciliation that
// becomes due meanwhile must not wait for the stuck operation while holding
// back all new work (it did, until full reconciliations were postponed
// while only stuck operations are in flight).
func TestStuckOperationDoesNotStallFullReconciliation(t *testing.T) {
	target := fake.New(wrappers)
	ops := newStopOps(target, func(key string) bool { return key == "stuck" })
	ops.ignoreCtx = true
	f := newFixture(t)
	if err := f.hive.Start(f.log, context.Background()); err != nil {
		t.Fatalf("hive start: %s", err)
	}
	f.markInit()
	r, err := reconciler.New(testConfig(f, ops, reconciler.Config[*testObject]{
		OperationTimeout: 20 * time.Millisecond,
	}), f.params)
	if err != nil {
		t.Fatalf("reconciler.New: %s", err)
	}
	h := &stopHarness{t: t, f: f, r: r, ops: ops}
	t.Cleanup(func() {
		close(ops.release)
		if err := f.hive.Stop(f.log, context.Background()); err != nil {
			t.Errorf("hive stop: %s", err)
		}
	})

	h.insert(&testObject{ID: "stuck", Value: "v1"})
	h.waitStarted(1)
	r.TriggerFullReconciliation()
	h.insert(&testObject{ID: "other", Value: "v1"})
	select {
	case key := <-ops.started:
		t.Logf("%s reconciled beside the stuck operation", key)
	case <-time.After(2 * time.Second):
		t.Fatalf("no operation started within 2s while one was stuck past its timeout and a full reconciliation was due; status: %+v", r.Status())
	}
}
