package reconciler_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
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
	c.ops.hive.Add(1) // before anything of the new hive can run
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
