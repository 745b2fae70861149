package reconciler_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// TestModelConfigs is TestModel for one per-object reconciler whose
// options each seed draws: the default first-come order, or the ordered
// mode with random priorities, fairness keys, per-target caps and
// MaxWait; a Concurrency of 1 to 4; an Ownership that flips, or none; and
// restarts of the hive over the table as it is (a new hive, the same
// target). Random changes, deletes and faults run through it. At random
// moments, with every goroutine of the bubble blocked, Explain is asked
// about a random key and its answer is checked against the model
// (checkExplain). At the end everything owned settles as TestModel checks
// it, and, in ordered mode, the aging bound holds between any two
// versions, whatever their targets (checkAgingAll).
//
// The seed is printed; CONVERGE_MODEL_SEED replays one, and
// CONVERGE_MODEL_SEEDS=N runs N seeds (scripts/soak.sh).
func TestModelConfigs(t *testing.T) {
	for _, seed := range modelSeeds(t, []uint64{1, 2, 3, 4, 5, 6}) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("replay: CONVERGE_MODEL_SEED=%d go test -race -run 'TestModelConfigs' ./reconciler", seed)
			prev := reconciler.SetForcePipelined(seed%2 == 1)
			defer reconciler.SetForcePipelined(prev)
			inModelBubble(t, func(t *testing.T) { runModelConfig(t, seed) })
		})
	}
}

// modelConfig is one seed's draw of the options.
type modelConfig struct {
	ordered     bool
	prios       map[int]int // nil: no Priority
	fairMod     int         // FairnessKey is key%fairMod (0: none)
	targetMod   int         // TargetKey is key%targetMod (0: none)
	cap         int
	maxWait     time.Duration
	concurrency int
	ownership   bool
	restarts    int
}

func drawConfig(rng *rand.Rand) modelConfig {
	c := modelConfig{ordered: rng.IntN(3) > 0, concurrency: 1 + rng.IntN(4), ownership: rng.IntN(2) == 0, restarts: rng.IntN(3)}
	if !c.ordered {
		return c
	}
	if rng.IntN(4) > 0 {
		c.prios = map[int]int{}
		for k := range modelKeys {
			c.prios[k] = rng.IntN(4)
		}
	}
	c.fairMod = []int{0, 2, 3}[rng.IntN(3)]
	c.targetMod = []int{0, 0, 3, 5}[rng.IntN(4)]
	if c.prios == nil && c.fairMod == 0 && c.targetMod == 0 {
		c.targetMod = 3
	}
	c.cap = 1 + rng.IntN(2)
	c.maxWait = time.Duration(5+rng.IntN(15)) * time.Millisecond
	return c
}

// apply sets c's options on cfg.
func (c modelConfig) apply(cfg *reconciler.Config[*testObject]) {
	cfg.Concurrency = c.concurrency
	if !c.ordered {
		return
	}
	cfg.MaxWait = c.maxWait
	if c.prios != nil {
		cfg.Priority = func(o *testObject) int { return c.prios[keyNum(o)] }
	}
	if c.fairMod > 0 {
		cfg.FairnessKey = func(o *testObject) string { return strconv.Itoa(keyNum(o) % c.fairMod) }
	}
	if c.targetMod > 0 {
		cfg.TargetKey, cfg.TargetConcurrency = c.target, c.cap
	}
}

// target is an object's TargetKey, "" without one.
func (c modelConfig) target(o *testObject) string {
	if c.targetMod == 0 {
		return ""
	}
	return strconv.Itoa(keyNum(o) % c.targetMod)
}

// configRun is one run of TestModelConfigs: the hive of the moment, its
// reconciler, and what outlives restarts (the target, the ownership, the
// record of operations).
type configRun struct {
	t    *testing.T
	c    modelConfig
	rng  *rand.Rand
	f    *fixture
	ctx  context.Context
	r    reconciler.Reconciler[*testObject]
	m    *modelTarget
	own  *flipOwnership
	rec  *opRecord
	live map[string]string // the model of the table: key -> value
	// breaks are the times the ready order was broken from outside (a
	// restart, an ownership flip): the aging bound does not span them.
	breaks []time.Time
}

func runModelConfig(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x636f6e66))
	c := drawConfig(rng)
	t.Logf("config: %+v", c)
	run := &configRun{t: t, c: c, rng: rng, m: newModelTarget(t, "c", seed), rec: newOpRecord(), live: map[string]string{}}
	run.m.noHang = c.ordered // a target held by a hung operation holds its keys, by design: no aging to check then
	if c.ownership {
		run.own = newFlipOwnership()
	}
	run.start(nil)
	restartAt := map[int]bool{}
	for range c.restarts {
		restartAt[50+rng.IntN(200)] = true
	}
	version := 0
	for i := range 300 {
		if restartAt[i] {
			run.restart()
		}
		if run.own != nil && rng.IntN(15) == 0 {
			run.own.randomFlip(run.f, rng)
			run.breaks = append(run.breaks, time.Now())
		}
		if rng.IntN(10) == 0 {
			synctest.Wait() // every goroutine blocked: the model and the engine agree on the present
			run.checkExplain(fmt.Sprintf("k%02d", rng.IntN(modelKeys)))
		}
		version = run.write(version)
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
	}
	run.settle()
	if c.ordered {
		run.rec.checkAgingAll(t, c, run.breaks)
	}
}

// start starts a hive over objs (nil: an empty table) and the reconciler.
func (run *configRun) start(objs []*testObject) {
	f := newFixture(run.t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	run.t.Cleanup(cancel)
	if err := f.hive.Start(f.log, ctx); err != nil {
		run.t.Fatal(err)
	}
	run.t.Cleanup(func() {
		if run.f == f { // else stopped by a restart
			if err := f.hive.Stop(f.log, context.Background()); err != nil {
				run.t.Error(err)
			}
		}
	})
	cfg := reconciler.Config[*testObject]{
		OperationTimeout: modelTimeout, RetryBackoffMin: time.Millisecond, RetryBackoffMax: 4 * time.Millisecond,
		RefreshInterval: reconciler.Off, FullReconciliationInterval: reconciler.Off, RoundSize: 5,
		MaxRetries: modelMaxRetries,
	}
	run.c.apply(&cfg)
	ops := run.rec.wrap(modelOps{run.m, modelMaxRetries}, run.c.target)
	if run.own != nil {
		cfg.Ownership = run.own
		ops = run.rec.wrap(ownModelOps{modelOps{run.m, modelMaxRetries}, run.own}, run.c.target)
	}
	run.f, run.ctx = f, ctx
	run.r = mustNew(run.t, f, testConfig(f, ops, cfg))
	f.load(objs) // and the table is initialized
}

// restart stops the hive and starts a new one over the table's objects as
// they are. The operations still running (ignoring their context) are
// waited for first: an operation left behind may act on the target after
// the new hive's, which no reconciler promises to order.
func (run *configRun) restart() {
	var objs []*testObject
	for obj := range run.f.table.All(run.f.db.ReadTxn()) {
		objs = append(objs, obj)
	}
	if err := run.f.hive.Stop(run.f.log, context.Background()); err != nil {
		run.t.Fatal(err)
	}
	for run.m.anyRunning() {
		time.Sleep(time.Millisecond)
	}
	run.breaks = append(run.breaks, time.Now())
	run.start(objs)
}

// write makes one random write of one to three keys (a burst, now and
// then), and returns the last version.
func (run *configRun) write(version int) int {
	f, rng := run.f, run.rng
	keys := []int{rng.IntN(modelKeys)}
	if rng.IntN(30) == 0 {
		keys = rng.Perm(modelKeys)
	} else if n := rng.IntN(3); n > 0 {
		keys = append(keys, rng.Perm(modelKeys)[:n]...)
	}
	wtxn := f.db.WriteTxn(f.table)
	for _, k := range keys {
		key := fmt.Sprintf("k%02d", k)
		if _, ok := run.live[key]; ok && rng.IntN(4) == 0 {
			if _, _, err := f.table.Delete(wtxn, &testObject{ID: key}); err != nil {
				run.t.Fatal(err)
			}
			delete(run.live, key)
			continue
		}
		version++
		run.live[key] = fmt.Sprintf("v%d", version)
		run.rec.written(key, run.live[key])
		if _, _, err := f.table.Insert(wtxn, &testObject{ID: key, Value: run.live[key], Status: reconciler.StatusPending()}); err != nil {
			run.t.Fatal(err)
		}
	}
	wtxn.Commit()
	return version
}

// settle stops the faults, settles ownership (on every key, or a random
// set, as settleOwned does), prunes and checks the model.
func (run *configRun) settle() {
	t, f, r, m := run.t, run.f, run.r, run.m
	owned := func(string) bool { return true }
	if run.own != nil {
		all, final := run.rng.IntN(2) == 0, map[string]bool{"k00": true}
		for i := range modelKeys {
			if run.rng.IntN(2) == 0 {
				final[fmt.Sprintf("k%02d", i)] = true
			}
		}
		run.own.flip(f, all, final)
		run.breaks = append(run.breaks, time.Now())
		owned = func(key string) bool { return all || final[key] }
	}
	m.mu.Lock()
	m.faults = false
	m.mu.Unlock()
	if err := r.WaitUntilSettled(run.ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	r.TriggerFullReconciliation()
	if err := r.WaitUntilPruned(run.ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitUntilSettled(run.ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	checkModel(t, f, run.live, map[string]*modelTarget{"c": m}, map[string]reconciler.Reconciler[*testObject]{"c": r}, statusOf, owned)
	if run.own != nil {
		run.own.mu.Lock()
		for _, v := range run.own.violations {
			t.Error(v)
		}
		run.own.mu.Unlock()
	}
}

// anyRunning reports whether an operation of the target runs.
func (m *modelTarget) anyRunning() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.running {
		if r {
			return true
		}
	}
	return false
}

// recordedOps records, around the model's operations, when each began
// and ended, by key and target, and when each version's first Update
// began.
type recordedOps struct {
	reconciler.Operations[*testObject]
	rec    *opRecord
	target func(*testObject) string
}

func (o recordedOps) Update(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	defer o.rec.begin(obj.ID, obj.Value, o.target(obj))()
	return o.Operations.Update(ctx, txn, rev, obj)
}

func (o recordedOps) Delete(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	defer o.rec.begin(obj.ID, "", o.target(obj))()
	return o.Operations.Delete(ctx, txn, rev, obj)
}
