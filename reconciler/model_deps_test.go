package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cilium/statedb"
	statedbindex "github.com/cilium/statedb/index"

	"github.com/converge-go/converge/reconciler"
)

// TestModelDependencies draws random dependency graphs (cycles, missing
// dependencies and self-dependencies included) and writes, changes and
// deletes objects at random, in bursts, while the target fails half of
// its calls and takes random time, with up to 4 workers. The target
// checks, as each operation starts:
//
//   - no Update starts while a key it depends on is absent from the
//     target or has an operation running;
//   - no Delete starts while the target holds an object that names the
//     key as a dependency.
//
// Every other seed, Ownership flips at random (to all keys, none or a
// random half), and the Delete rule is checked where it can hold: for a
// dependent whose object in the target this replica applied after it
// last lost the key. (A replica cannot order its Deletes after what
// another replica's target holds, nor know which version the owner left
// there: docs/replicas.md shards a dependent with its dependencies.)
// Ownership ends on every key before the final checks. Every third seed
// restarts the hive once or twice over the table as it is; a key the
// target holds at another version than the table's (not reconciled when
// the run stopped) is what the new run cannot know (docs/dependencies.md),
// and the Delete rule waits for it to be applied again, as after a flip.
//
// Once the faults stop and everything settles: every key whose
// dependencies are all (transitively) in the table with no cycle is Done
// with its value in the target; every key on a cycle carries the cycle
// error; every other key is Blocked (Explain says so); a deleted key is
// gone from the target unless its Delete is Blocked (Explain says so),
// and then an object of the table names it.
//
// The seed is printed; CONVERGE_MODEL_SEED replays one.
func TestModelDependencies(t *testing.T) {
	for _, seed := range modelSeeds(t, []uint64{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("replay: CONVERGE_MODEL_SEED=%d go test -race -run 'TestModelDependencies' ./reconciler", seed)
			inModelBubble(t, func(t *testing.T) { runDepsModel(t, seed) })
		})
	}
}

const depsModelKeys = 12

// depTarget is the model's target: values by key, with the rules of
// dependencies checked as operations start.
type depTarget struct {
	mu         sync.Mutex
	rng        *rand.Rand
	faults     bool
	state      map[string]string
	running    map[string]bool
	violations []string
	// With ownership flips: own. flips counts the flips and restarts;
	// lostAt is the flip that last took each key away, or the restart
	// that left it in the target at a version the table no longer
	// holds, until an Update of it that began after that succeeded (the
	// target holds what this run applied since); began is the count as
	// each key's operation began.
	own    *flipOwnership
	flips  int
	lostAt map[string]int
	began  map[string]int
}

// excused reports whether a Delete may start while the target holds
// dependent, which names the key: what the target holds of dependent
// was not applied by this replica since it last owned it again.
func (m *depTarget) excused(dependent string) bool { return m.lostAt[dependent] > 0 }

// anyRunning reports whether an operation is running.
func (m *depTarget) anyRunning() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.running) > 0
}

func (m *depTarget) begin(key string, check func() string) (fail bool, latency time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v := check(); v != "" {
		m.violations = append(m.violations, v)
	}
	m.running[key] = true
	if m.began != nil { // the dependency model's, not every user's
		m.began[key] = m.flips
	}
	return m.faults && m.rng.IntN(2) == 0, time.Duration(m.rng.IntN(3000)) * time.Microsecond
}

func (m *depTarget) end(key string, fail bool, apply func()) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.running, key)
	if fail {
		return errors.New("injected failure")
	}
	apply()
	return nil
}

type depModelOps struct{ m *depTarget }

func (o depModelOps) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *testObject) error {
	m := o.m
	fail, latency := m.begin(obj.ID, func() string {
		for _, d := range dependsOn(obj) {
			if _, ok := m.state[string(d)]; !ok || m.running[string(d)] {
				return fmt.Sprintf("update of %s (%s) started while its dependency %s is absent (%v) or busy (%v)",
					obj.ID, obj.Value, d, !ok, m.running[string(d)])
			}
		}
		return ""
	})
	time.Sleep(latency)
	return m.end(obj.ID, fail, func() {
		m.state[obj.ID] = obj.Value
		if m.lostAt[obj.ID] <= m.began[obj.ID] {
			delete(m.lostAt, obj.ID) // applied since it was last lost
		}
	})
}

func (o depModelOps) Delete(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *testObject) error {
	m := o.m
	fail, latency := m.begin(obj.ID, func() string {
		for k, v := range m.state {
			names := func(d statedbindex.Key) bool { return string(d) == obj.ID }
			if k != obj.ID && slices.ContainsFunc(dependsOn(&testObject{Value: v}), names) && !m.excused(k) {
				return fmt.Sprintf("delete of %s started while %s (%s), which depends on it, is in the target", obj.ID, k, v)
			}
		}
		return ""
	})
	time.Sleep(latency)
	return m.end(obj.ID, fail, func() { delete(m.state, obj.ID) })
}

func (o depModelOps) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*testObject, statedb.Revision]) error {
	return nil
}

func runDepsModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x64657073))
	m := &depTarget{rng: rand.New(rand.NewPCG(seed, 1)), faults: true, state: map[string]string{}, running: map[string]bool{},
		lostAt: map[string]int{}, began: map[string]int{}}
	cfg := reconciler.Config[*testObject]{
		RetryBackoffMin: time.Millisecond, RetryBackoffMax: 4 * time.Millisecond, RoundSize: 5,
		RefreshInterval: reconciler.Off, FullReconciliationInterval: reconciler.Off,
		Concurrency: 1 + rng.IntN(4), DependsOn: dependsOn,
	}
	if seed%2 == 0 {
		m.own = newFlipOwnership()
		cfg.Ownership = m.own
	}
	run := &depsRun{t: t, m: m, cfg: cfg}
	run.start(nil)
	restartAt := map[int]bool{}
	if seed%3 == 1 {
		for range 1 + rng.IntN(2) {
			restartAt[50+rng.IntN(150)] = true
		}
	}
	live := map[string]string{}
	version := 0
	var written statedb.Revision
	for i := range 250 {
		if restartAt[i] {
			run.restart(live)
		}
		f := run.f
		if m.own != nil && rng.IntN(40) == 0 {
			m.flip(f, rng)
		}
		keys := []int{rng.IntN(depsModelKeys)}
		if rng.IntN(20) == 0 {
			keys = rng.Perm(depsModelKeys)[:1+rng.IntN(depsModelKeys)]
		}
		wtxn := f.db.WriteTxn(f.table)
		for _, k := range keys {
			key := fmt.Sprintf("k%02d", k)
			if _, ok := live[key]; ok && rng.IntN(4) == 0 {
				f.table.Delete(wtxn, &testObject{ID: key})
				delete(live, key)
				continue
			}
			version++
			var deps []string
			for range rng.IntN(3) {
				deps = append(deps, fmt.Sprintf("k%02d", rng.IntN(depsModelKeys+2))) // some never written
			}
			live[key] = fmt.Sprintf("v%d>%s", version, strings.Join(deps, ","))
			f.table.Insert(wtxn, &testObject{ID: key, Value: live[key], Status: reconciler.StatusPending()})
		}
		written = f.table.Revision(wtxn)
		wtxn.Commit()
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
	}
	m.mu.Lock()
	m.faults = false
	m.mu.Unlock()
	if m.own != nil {
		m.own.flip(run.f, true, nil)
	}
	settleDepsModel(t, run.r, written)
	checkDepsModel(t, run.f, run.r, m, live)
}

// depsRun is the dependency model's hive and reconciler, started anew at
// a restart over the table's objects as they are.
type depsRun struct {
	t   *testing.T
	m   *depTarget
	cfg reconciler.Config[*testObject]
	f   *fixture
	r   reconciler.Reconciler[*testObject]
}

// start starts a hive over objs (nil: an empty table) and the reconciler.
func (run *depsRun) start(objs []*testObject) {
	f := newFixture(run.t)
	if err := f.hive.Start(f.log, context.Background()); err != nil {
		run.t.Fatal(err)
	}
	run.t.Cleanup(func() {
		if run.f == f { // else stopped by a restart
			if err := f.hive.Stop(f.log, context.Background()); err != nil {
				run.t.Error(err)
			}
		}
	})
	run.f = f
	f.load(objs) // before the reconciler: in the table as its run begins
	run.r = mustNew(run.t, f, testConfig(f, depModelOps{run.m}, run.cfg))
	// Its run has begun (the table read as it is, before any later
	// write) once everything in the bubble waits.
	synctest.Wait()
}

// restart stops the hive, once its operations returned, and starts a
// new one over the table's objects. What the target holds of a key the
// table holds another version of, or none, was left by the run before:
// the new run cannot know it (docs/dependencies.md), and the Delete rule
// is not checked for it until it is applied again.
func (run *depsRun) restart(live map[string]string) {
	var objs []*testObject
	for obj := range run.f.table.All(run.f.db.ReadTxn()) {
		objs = append(objs, obj)
	}
	if err := run.f.hive.Stop(run.f.log, context.Background()); err != nil {
		run.t.Fatal(err)
	}
	m := run.m
	for m.anyRunning() {
		time.Sleep(time.Millisecond)
	}
	m.mu.Lock()
	m.flips++
	for k, v := range m.state {
		if live[k] != v {
			m.lostAt[k] = m.flips
		}
	}
	m.mu.Unlock()
	run.start(objs)
}

// settleDepsModel waits until everything that can settle does: every
// write up to written read, no operation running, no retry waiting.
func settleDepsModel(t *testing.T, r reconciler.Reconciler[*testObject], written statedb.Revision) {
	t.Helper()
	deadline := time.Now().Add(time.Hour) // bubble time: a model that never settles fails, not hangs
	for {
		synctest.Wait()
		s := r.Status()
		if time.Now().After(deadline) {
			t.Fatalf("not settled after an hour: %+v", s)
		}
		e, err := r.Explain(context.Background(), []byte("k00"))
		if err != nil {
			t.Fatal(err)
		}
		if e.ReadTo >= written && s.InFlight == 0 && s.Retries == 0 && s.Waiting == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// flip flips ownership at random and records the keys it took away.
func (m *depTarget) flip(f *fixture, rng *rand.Rand) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.own.randomFlip(f, rng) // under m.mu: no operation begins or ends between the flip and its record
	m.flips++
	for i := range depsModelKeys + 2 {
		if k := fmt.Sprintf("k%02d", i); !m.own.Owns([]byte(k)) {
			m.lostAt[k] = m.flips
		}
	}
}

// checkDepsModel checks the settled state against the graph of live.
func checkDepsModel(t *testing.T, f *fixture, r reconciler.Reconciler[*testObject], m *depTarget, live map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range m.violations {
		t.Error(v)
	}
	deps := func(k string) []string {
		var out []string
		for _, d := range dependsOn(&testObject{Value: live[k]}) {
			out = append(out, string(d))
		}
		return out
	}
	onCycle := func(k string) bool { return onDepsCycle(live, deps, k) }
	explain := func(k string) reconciler.Explanation {
		e, err := r.Explain(context.Background(), []byte(k))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for k, v := range live {
		st := tableStatus(f, k)
		depsDone := true
		for _, d := range deps(k) {
			depsDone = depsDone && tableStatus(f, d).Kind == reconciler.StatusKindDone
		}
		switch {
		case st.Kind == reconciler.StatusKindDone:
			// (A dependency only gates: it may have changed since.)
			if m.state[k] != v {
				t.Errorf("%s (%s) is Done, but the target holds %q", k, v, m.state[k])
			}
		case onCycle(k):
			if st.Kind != reconciler.StatusKindError || !strings.Contains(st.Error, "dependency cycle") {
				t.Errorf("%s (%s) is on a cycle: %s %q, want the cycle error\n%s\n%v", k, v, st.Kind, st.Error, explain(k), live)
			}
		case depsDone:
			t.Errorf("%s (%s): every dependency is Done, no cycle, yet it is %s %q\n%s", k, v, st.Kind, st.Error, explain(k))
		default:
			e := explain(k)
			d, _, _ := strings.Cut(strings.TrimPrefix(e.Reason, "blocked on "), ":")
			if e.State != reconciler.KeyBlocked || !slices.Contains(deps(k), d) || tableStatus(f, d).Kind == reconciler.StatusKindDone {
				t.Errorf("%s (%s) waits for a dependency not Done: want Blocked on it\n%s\n%v", k, v, e, live)
			}
		}
	}
	checkDeletedKept(t, m, live, explain)
}

// checkDeletedKept checks that a key deleted from the table and still in
// the target has its Delete Blocked. A key lost to another replica since
// it was last applied here may have been deleted while the owner's (its
// Delete the owner's work, docs/replicas.md): it may stay.
func checkDeletedKept(t *testing.T, m *depTarget, live map[string]string, explain func(string) reconciler.Explanation) {
	for k, v := range m.state {
		if _, ok := live[k]; ok || m.excused(k) {
			continue
		}
		e := explain(k)
		if e.State != reconciler.KeyBlocked || !e.Deleted {
			t.Errorf("%s (%s) was deleted but is in the target, and its Delete is not Blocked:\n%s", k, v, e)
		}
	}
}

// onDepsCycle reports whether k reaches itself along the dependencies of
// the live objects.
func onDepsCycle(live map[string]string, deps func(string) []string, k string) bool {
	seen := map[string]bool{}
	stack := deps(k)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == k {
			return true
		}
		if seen[n] {
			continue
		}
		seen[n] = true
		if _, ok := live[n]; ok {
			stack = append(stack, deps(n)...)
		}
	}
	return false
}
