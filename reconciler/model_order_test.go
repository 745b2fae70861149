package reconciler_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// TestModelOrdered drives a reconciler with random priorities, fairness
// keys and per-target caps (Concurrency 4, one operation per target)
// through random changes and faults, and checks it against the model of
// TestModel (every live object Done where the target holds its latest
// value, or Error where the model gave up; deletes gone; no overlap), and
// the aging bound: no change waits to be started longer than MaxWait plus
// the operations that were due before it, whatever its priority or
// fairness key. (No fault hangs: a target held by a hung operation makes
// its keys wait for it, by design.)
func TestModelOrdered(t *testing.T) {
	for _, seed := range modelSeeds(t, []uint64{1, 2, 3, 4}) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("replay: CONVERGE_MODEL_SEED=%d go test -race -run 'TestModelOrdered' ./reconciler", seed)
			inModelBubble(t, func(t *testing.T) { runModelOrdered(t, seed) })
		})
	}
}

const (
	orderedMaxWait = 10 * time.Millisecond
	// orderedSlack is a round's operations: what may start ahead of an
	// overdue change once it is overdue (the workers' queue holds up to
	// Concurrency beside those running), each up to 2ms.
	orderedSlack = 5 * time.Millisecond
)

// startedOps wraps the model's operations and records, per key and value,
// when its first Update started.
type startedOps struct {
	modelOps
	mu      sync.Mutex
	started map[string]time.Time
}

func (o *startedOps) Update(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	o.mu.Lock()
	if _, ok := o.started[obj.ID+"="+obj.Value]; !ok {
		o.started[obj.ID+"="+obj.Value] = time.Now()
	}
	o.mu.Unlock()
	return o.modelOps.Update(ctx, txn, rev, obj)
}

func keyNum(o *testObject) int { n, _ := strconv.Atoi(o.ID[1:]); return n }

func runModelOrdered(t *testing.T, seed uint64) {
	f, ctx := startFixture(t, 60*time.Second)
	rng := rand.New(rand.NewPCG(seed, 0x6f72646572))
	m := newModelTarget(t, "o", seed)
	m.noHang = true
	ops := &startedOps{modelOps: modelOps{m, modelMaxRetries}, started: map[string]time.Time{}}
	prios := map[int]int{}
	for k := range modelKeys {
		prios[k] = rng.IntN(4)
	}
	cfg := reconciler.Config[*testObject]{
		OperationTimeout: modelTimeout, RetryBackoffMin: time.Millisecond, RetryBackoffMax: 4 * time.Millisecond,
		RefreshInterval: reconciler.Off, FullReconciliationInterval: reconciler.Off, RoundSize: 5,
		Concurrency: 4, MaxRetries: modelMaxRetries, MaxWait: orderedMaxWait,
		Priority:          func(o *testObject) int { return prios[keyNum(o)] },
		FairnessKey:       func(o *testObject) string { return strconv.Itoa(keyNum(o) % 2) },
		TargetKey:         func(o *testObject) string { return strconv.Itoa(keyNum(o) % 3) },
		TargetConcurrency: 1,
	}
	r := mustNew(t, f, statusSetConfig(f, "o", ops, cfg))
	f.markInit()

	live := map[string]string{}
	written := map[string]time.Time{}
	version := 0
	hi, lo := keysOfPriority(prios, 3), keysOfPriority(prios, 0)
	for i := range 300 {
		wtxn := f.db.WriteTxn(f.table)
		keys := []int{rng.IntN(modelKeys)}
		switch {
		case i%40 == 0:
			keys = rng.Perm(modelKeys) // a burst: a backlog the order sorts
		case i >= 100 && i < 200 && len(hi) > 0:
			// A storm of the highest priority, more than the workers do:
			// without aging, the lowest would wait it out.
			keys = nil
			for range 6 {
				keys = append(keys, hi[rng.IntN(len(hi))])
			}
			if i%10 == 0 && len(lo) > 0 {
				keys = append(keys, lo[rng.IntN(len(lo))])
			}
		}
		for _, k := range keys {
			key := fmt.Sprintf("k%02d", k)
			if _, ok := live[key]; ok && rng.IntN(4) == 0 {
				if _, _, err := f.table.Delete(wtxn, &testObject{ID: key}); err != nil {
					t.Fatal(err)
				}
				delete(live, key)
				continue
			}
			version++
			live[key] = fmt.Sprintf("v%d", version)
			written[key+"="+live[key]] = time.Now()
			if _, _, err := f.table.Insert(wtxn, &testObject{ID: key, Value: live[key], Statuses: reconciler.NewStatusSet().Pending()}); err != nil {
				t.Fatal(err)
			}
		}
		wtxn.Commit()
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Microsecond)
	}
	m.mu.Lock()
	m.faults = false
	m.mu.Unlock()
	if err := r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	before := m.prunesNow()
	r.TriggerFullReconciliation()
	f.waitFor(ctx, t, "the prune", func() bool { return m.prunesNow() > before })
	if err := r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	checkModel(t, f, live, map[string]*modelTarget{"o": m}, map[string]reconciler.Reconciler[*testObject]{"o": r}, statusSetOf, nil)

	ops.mu.Lock()
	defer ops.mu.Unlock()
	checkAging(t, written, ops.started)
}

// checkAging checks the aging rule on what ran: of two versions of keys
// of one target (so that a cap holds both or neither), the later written
// is never started before the earlier one once the earlier one has waited
// MaxWait (and the slack of the workers' queue).
func checkAging(t *testing.T, written, started map[string]time.Time) {
	t.Helper()
	type ver struct {
		name         string
		target       int
		wrote, start time.Time
	}
	var vers []ver
	for v, at := range written {
		if start, ok := started[v]; ok {
			n, _ := strconv.Atoi(v[1:3])
			vers = append(vers, ver{v, n % 3, at, start})
		}
	}
	overtaken := 0
	for _, u := range vers {
		for _, v := range vers {
			if u.target != v.target || !v.wrote.After(u.wrote) || !v.start.Before(u.start) {
				continue
			}
			overtaken++
			if waited := v.start.Sub(u.wrote); waited > orderedMaxWait+orderedSlack {
				t.Errorf("%s (written %v before) had waited %v when %s, written after it, started", u.name,
					v.wrote.Sub(u.wrote), waited, v.name)
			}
		}
	}
	var worst time.Duration
	for _, u := range vers {
		worst = max(worst, u.start.Sub(u.wrote))
	}
	t.Logf("%d versions started, %d times one overtook an earlier one; longest wait %v", len(vers), overtaken, worst)
}

// keysOfPriority lists the keys whose priority is p.
func keysOfPriority(prios map[int]int, p int) []int {
	var out []int
	for k := range modelKeys {
		if prios[k] == p {
			out = append(out, k)
		}
	}
	return out
}
