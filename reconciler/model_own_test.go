package reconciler_test

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// TestModelOwnership is TestModel for a per-object reconciler whose
// Ownership flips, at random times, to all keys, none, or a random half,
// and says so on Changed (every fourth seed: two, over a StatusSet, each
// flipping on its own), while changes, faults and full reconciliations
// (Prunes that remove what this replica owns and was not given) go on.
// Its invariants:
//
//   - no operation starts for a key while it is not owned: each runs
//     under its key's claim, and that claim is live only while the key
//     is owned (a flip cancels the claims it ends);
//   - no status is written into a key while it is not owned (flips take
//     the table's write lock, so a status write sees one ownership);
//   - never two operations on one key at once;
//   - once ownership settles on every key (all of them, or a random set),
//     everything owned settles as the model says (checkModel), Status()
//     counts the rest as unowned, WaitUntilSettled returns, and no
//     operation starts after it returned.
//
// Seeds as in TestModel: CONVERGE_MODEL_SEED replays one,
// CONVERGE_MODEL_SEEDS=N runs N (scripts/soak.sh).
func TestModelOwnership(t *testing.T) {
	for _, seed := range modelSeeds(t, []uint64{1, 2, 3}) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("replay: CONVERGE_MODEL_SEED=%d go test -race -run 'TestModelOwnership' ./reconciler", seed)
			prev := reconciler.SetForcePipelined(seed%2 == 1)
			defer reconciler.SetForcePipelined(prev)
			inModelBubble(t, func(t *testing.T) { runOwnershipModel(t, seed) })
		})
	}
}

// flipOwnership owns all keys, none, or a set; "" (nil, the whole set)
// is claimed while it owns any. It records what breaks the invariants.
type flipOwnership struct {
	mu         sync.Mutex
	all        bool
	set        map[string]bool // when !all; empty: none
	changed    chan struct{}
	claims     map[string]map[*context.CancelFunc]struct{}
	violations []string
}

func newFlipOwnership() *flipOwnership {
	return &flipOwnership{all: true, changed: make(chan struct{}), claims: map[string]map[*context.CancelFunc]struct{}{}}
}

func (o *flipOwnership) ownsLocked(key string) bool {
	if key == "" {
		return o.all || len(o.set) > 0
	}
	return o.all || o.set[key]
}

func (o *flipOwnership) Owns(key []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ownsLocked(string(key))
}

func (o *flipOwnership) Acquire(ctx context.Context, key []byte) (context.Context, func(), bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := string(key)
	if !o.ownsLocked(k) {
		return nil, nil, false
	}
	ctx, cancel := context.WithCancel(context.WithValue(ctx, claimKey{}, k))
	if o.claims[k] == nil {
		o.claims[k] = map[*context.CancelFunc]struct{}{}
	}
	o.claims[k][&cancel] = struct{}{}
	return ctx, func() {
		o.mu.Lock()
		delete(o.claims[k], &cancel)
		o.mu.Unlock()
		cancel()
	}, true
}

func (o *flipOwnership) Changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}

// flip sets the owned set, under the table's write lock, ends the claims
// it takes away (the whole set's at every flip: its claim ends with the
// set it covered) and says so on Changed.
func (o *flipOwnership) flip(f *fixture, all bool, set map[string]bool) {
	wtxn := f.db.WriteTxn(f.table)
	o.mu.Lock()
	o.all, o.set = all, set
	for k, cancels := range o.claims {
		if k == "" || !o.ownsLocked(k) {
			for c := range cancels {
				(*c)()
			}
			delete(o.claims, k)
		}
	}
	close(o.changed)
	o.changed = make(chan struct{})
	o.mu.Unlock()
	wtxn.Abort()
}

// randomFlip flips to all, none or a random half of the keys.
func (o *flipOwnership) randomFlip(f *fixture, rng *rand.Rand) {
	switch rng.IntN(3) {
	case 0:
		o.flip(f, true, nil)
	case 1:
		o.flip(f, false, nil)
	default:
		set := map[string]bool{}
		for i := range modelKeys {
			if rng.IntN(2) == 0 {
				set[fmt.Sprintf("k%02d", i)] = true
			}
		}
		o.flip(f, false, set)
	}
}

// checkOp records an operation on key that runs without its key's claim,
// or under a live claim while the key is not owned.
func (o *flipOwnership) checkOp(ctx context.Context, op, key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if claim, _ := ctx.Value(claimKey{}).(string); claim != key {
		o.violations = append(o.violations, fmt.Sprintf("%s %s ran under the claim of %q", op, key, claim))
	}
	if !o.ownsLocked(key) && ctx.Err() == nil {
		o.violations = append(o.violations, fmt.Sprintf("%s %s started while not owned", op, key))
	}
}

// checkWrite records a result status written into a key not owned. It is
// called from SetObjectStatus, inside the write transaction.
func (o *flipOwnership) checkWrite(key string, st reconciler.Status) {
	if key == "" || (st.Kind != reconciler.StatusKindDone && st.Kind != reconciler.StatusKindError) {
		return // a probe, or a retry's clone carrying the status that asked
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.ownsLocked(key) {
		o.violations = append(o.violations, fmt.Sprintf("%s written into %s while not owned", st.Kind, key))
	}
}

// ownModelOps is modelOps with the claims checked; Prune removes only what
// this replica owns, as a sharded target's must.
type ownModelOps struct {
	modelOps
	own *flipOwnership
}

func (o ownModelOps) Update(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	o.own.checkOp(ctx, "Update", obj.ID)
	return o.modelOps.Update(ctx, txn, rev, obj)
}

func (o ownModelOps) Delete(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	o.own.checkOp(ctx, "Delete", obj.ID)
	return o.modelOps.Delete(ctx, txn, rev, obj)
}

func (o ownModelOps) Prune(ctx context.Context, _ statedb.ReadTxn, objs iter.Seq2[*testObject, statedb.Revision]) error {
	o.own.checkOp(ctx, "Prune", "")
	desired := map[string]bool{}
	for obj := range objs {
		desired[obj.ID] = true
	}
	o.m.mu.Lock()
	defer o.m.mu.Unlock()
	for key := range o.m.state {
		if !desired[key] && o.own.Owns([]byte(key)) {
			delete(o.m.state, key)
			if o.m.givenUp[key] == "delete" {
				delete(o.m.givenUp, key)
			}
		}
	}
	o.m.prunes++
	return nil
}

// ownedRec is one reconciler of the ownership model test: its target,
// its Ownership and itself.
type ownedRec struct {
	m   *modelTarget
	own *flipOwnership
	r   reconciler.Reconciler[*testObject]
}

// startOwned starts the reconcilers named: one over the objects' own
// Status, or several over their StatusSet, each with an Ownership of its
// own that records a result status written into a key it does not own.
func startOwned(t *testing.T, f *fixture, seed uint64, names []string) map[string]ownedRec {
	recs := map[string]ownedRec{}
	for _, name := range names {
		m, own := newModelTarget(t, name, seed), newFlipOwnership()
		common := reconciler.Config[*testObject]{
			OperationTimeout: modelTimeout, RetryBackoffMin: time.Millisecond, RetryBackoffMax: 4 * time.Millisecond,
			RefreshInterval: reconciler.Off, FullReconciliationInterval: reconciler.Off, RoundSize: 5, Concurrency: 4,
			Ownership: own,
		}
		ops := ownModelOps{modelOps{m, 0}, own}
		cfg := testConfig(f, ops, common)
		if len(names) > 1 {
			cfg = statusSetConfig(f, name, ops, common)
		}
		set := cfg.SetObjectStatus
		cfg.SetObjectStatus = func(o *testObject, s reconciler.Status) *testObject {
			own.checkWrite(o.ID, s)
			return set(o, s)
		}
		recs[name] = ownedRec{m: m, own: own, r: mustNew(t, f, cfg)}
	}
	return recs
}

// Every fourth seed runs two reconcilers over a StatusSet, each flipping
// on its own; the others one over the object's Status.
func runOwnershipModel(t *testing.T, seed uint64) {
	f, ctx := startFixture(t, 60*time.Second)
	rng := rand.New(rand.NewPCG(seed, 0x6f776e))
	names := []string{"a"}
	if seed%4 == 3 {
		names = []string{"a", "b"}
	}
	recs := startOwned(t, f, seed, names)
	f.markInit()

	live := map[string]string{}
	version := 0
	for range 300 {
		for _, name := range names {
			if rng.IntN(10) == 0 {
				recs[name].own.randomFlip(f, rng)
			}
			if rng.IntN(40) == 0 {
				recs[name].r.TriggerFullReconciliation() // a Prune under the flips
			}
		}
		wtxn := f.db.WriteTxn(f.table)
		for range 1 + rng.IntN(3) {
			key := fmt.Sprintf("k%02d", rng.IntN(modelKeys))
			if _, ok := live[key]; ok && rng.IntN(3) == 0 {
				if _, _, err := f.table.Delete(wtxn, &testObject{ID: key}); err != nil {
					t.Fatal(err)
				}
				delete(live, key)
				continue
			}
			version++
			live[key] = fmt.Sprintf("v%d", version)
			obj := &testObject{ID: key, Value: live[key], Status: reconciler.StatusPending(), Statuses: reconciler.NewStatusSet()}
			if old, _, found := f.table.Get(wtxn, idIndex.Query(key)); found {
				obj.Statuses = old.Statuses.Pending()
			}
			if _, _, err := f.table.Insert(wtxn, obj); err != nil {
				t.Fatal(err)
			}
		}
		wtxn.Commit()
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // let operations, retries and flips interleave
	}
	// No more changes; flips and faults go on for a while.
	for range 10 {
		for _, name := range names {
			recs[name].own.randomFlip(f, rng)
		}
		time.Sleep(time.Duration(rng.IntN(20000)) * time.Microsecond)
	}
	settleOwned(ctx, t, f, rng, seed, live, names, recs)
}

// settleOwned settles ownership on every key: on all of them, or (every
// third seed) on a random set, whose keys are checked; the others are
// another replica's. The faults stop, and each reconciler must settle,
// prune, and start nothing after its wait returned.
func settleOwned(ctx context.Context, t *testing.T, f *fixture, rng *rand.Rand, seed uint64, live map[string]string, names []string, recs map[string]ownedRec) {
	all, final := seed%3 != 2, map[string]bool{}
	if !all {
		for i := range modelKeys {
			if i == 0 || rng.IntN(2) == 0 {
				final[fmt.Sprintf("k%02d", i)] = true
			}
		}
	}
	owned := func(key string) bool { return all || final[key] }
	targets, rs := map[string]*modelTarget{}, map[string]reconciler.Reconciler[*testObject]{}
	for _, name := range names {
		rec := recs[name]
		rec.own.flip(f, all, final)
		rec.m.mu.Lock()
		rec.m.faults = false
		rec.m.mu.Unlock()
		targets[name], rs[name] = rec.m, rec.r
	}
	for _, name := range names {
		m, r := recs[name].m, recs[name].r
		if err := r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
			t.Fatalf("%s: %s", name, err)
		}
		m.mu.Lock()
		calls, prunes := m.calls, m.prunes
		m.mu.Unlock()
		// A prune removes what deletes read while not owned left behind.
		r.TriggerFullReconciliation()
		f.waitFor(ctx, t, name+"'s prune", func() bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.prunes > prunes
		})
		if err := r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
			t.Fatalf("%s after the prune: %s", name, err)
		}
		m.mu.Lock()
		if m.calls != calls {
			t.Errorf("%s: %d operations started after WaitUntilSettled returned", name, m.calls-calls)
		}
		m.mu.Unlock()
	}
	status := statusOf
	if len(names) > 1 {
		status = statusSetOf
	}
	checkModel(t, f, live, targets, rs, status, owned)
	for _, name := range names {
		own := recs[name].own
		own.mu.Lock()
		for _, v := range own.violations {
			t.Errorf("%s: %s", name, v)
		}
		own.mu.Unlock()
	}
}
