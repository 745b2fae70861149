package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// TestModel drives three reconcilers over one table through a StatusSet
// (a and b per-object, a with Concurrency 4 and MaxRetries; s whole-set)
// with random changes and random faults, then checks the engine against a
// reference model that is small enough to be obviously right:
//
//   - per reconciler and key, the latest version, and whether the model
//     gave up on it (a Permanent failure, or MaxRetries failures in a row);
//   - once the faults stop and the waits return, every live object is
//     Done for a reconciler whose target holds its latest value, or Error
//     exactly where the model gave up; every deleted key is gone from the
//     targets (after a prune settles given-up deletes); no two operations
//     on one key ever overlapped; and Status() counts what the table says;
//   - for s (model_sync_test.go): every Sync's changes cover what its
//     snapshot changed since the last Sync the engine believes applied, no
//     two Syncs overlapped, and after a full Sync the target equals the
//     last Sync's desired set, which equals the table.
//
// The seed is printed; CONVERGE_MODEL_SEED replays one, and
// CONVERGE_MODEL_SEEDS=N runs N seeds (the soak in scripts/soak.sh).
func TestModel(t *testing.T) {
	for _, seed := range modelSeeds(t, []uint64{1, 2, 3, 4, 5}) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("replay: CONVERGE_MODEL_SEED=%d go test -race -run 'TestModel' ./reconciler", seed)
			// Odd seeds send every commit through the committer
			// goroutine, as a backlog does: its requests wait in
			// stCommitting while changes, retries and faults go on.
			prev := reconciler.SetForcePipelined(seed%2 == 1)
			defer reconciler.SetForcePipelined(prev)
			inModelBubble(t, func(t *testing.T) { runModel(t, seed) })
		})
	}
}

// inModelBubble runs a model test in a testing/synctest bubble. The model
// decides which attempts overrun OperationTimeout (faultOverdue sleeps
// past it, every other fault returns within 2ms): on the real clock a
// loaded machine (-race, CPU burners, CI running packages side by side)
// can stretch an attempt the model meant to succeed past the deadline,
// and the engine then rightly judges a timeout the model did not make.
// On the bubble's clock time passes only when every goroutine waits, so
// an attempt lasts exactly what the model says, and the goroutines still
// interleave for real.
func inModelBubble(t *testing.T, run func(t *testing.T)) {
	synctest.Test(t, run)
}

// modelSeeds are the seeds a model test runs: def, or the one
// CONVERGE_MODEL_SEED names, or CONVERGE_MODEL_SEEDS=N of them.
func modelSeeds(t *testing.T, def []uint64) []uint64 {
	if s := os.Getenv("CONVERGE_MODEL_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return []uint64{seed}
	}
	if s := os.Getenv("CONVERGE_MODEL_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		var seeds []uint64
		for i := range n {
			seeds = append(seeds, uint64(100+i))
		}
		return seeds
	}
	return def
}

const (
	modelKeys       = 16
	modelTimeout    = 20 * time.Millisecond
	modelMaxRetries = 3
)

// modelFault is what one operation call does.
type modelFault int

const (
	faultOK modelFault = iota
	faultFail
	faultPermanent
	faultDeferNil   // RetryAfter(short, nil): not a failure
	faultDeferErr   // RetryAfter(short, err): a failure
	faultPanicking  // a failure
	faultOverdue    // ignores its context past the timeout, then applies: a failure
	modelFaultCount // keep last
)

// modelTarget is one reconciler's target and its bookkeeping of what the
// engine must conclude.
type modelTarget struct {
	t          *testing.T
	name       string
	rng        *rand.Rand
	mu         sync.Mutex
	faults     bool
	noHang     bool              // faultOverdue succeeds instead
	state      map[string]string // key -> applied value
	running    map[string]bool
	failures   map[string]int    // consecutive failures of the current request
	failedOn   map[string]string // the value (or "delete") those failures were for
	givenUp    map[string]string // key -> the value (or "delete") the engine must have given up on
	prunes     int
	calls      int
	overlapped []string
}

func newModelTarget(t *testing.T, name string, seed uint64) *modelTarget {
	return &modelTarget{t: t, name: name, rng: rand.New(rand.NewPCG(seed, uint64(len(name)))), faults: true,
		state: map[string]string{}, running: map[string]bool{}, failures: map[string]int{},
		failedOn: map[string]string{}, givenUp: map[string]string{}}
}

// do runs one operation on key for what ("delete" or a value), with a
// fault drawn from the seeded stream.
func (m *modelTarget) do(ctx context.Context, key, what string, maxRetries int, apply func()) error {
	m.mu.Lock()
	if m.running[key] {
		m.overlapped = append(m.overlapped, key)
	}
	m.running[key] = true
	m.calls++
	fault := faultOK
	if m.faults {
		fault = modelFault(m.rng.IntN(int(modelFaultCount) * 2)) // half of the calls succeed
		if fault >= modelFaultCount || (what == "delete" && fault == faultPermanent) || (m.noHang && fault == faultOverdue) {
			fault = faultOK
		}
	}
	if m.failedOn[key] != what {
		m.failures[key], m.failedOn[key] = 0, what // a new request: the engine's count restarts too
	}
	// Latency widens the windows in which the other reconciler writes
	// while this operation runs.
	latency := time.Duration(m.rng.IntN(2000)) * time.Microsecond
	m.mu.Unlock()
	time.Sleep(latency)
	defer func() {
		m.mu.Lock()
		m.running[key] = false
		m.mu.Unlock()
	}()

	failed := func(giveUp bool) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.failures[key]++
		if giveUp || (maxRetries > 0 && m.failures[key] >= maxRetries) {
			m.givenUp[key] = what
		}
	}
	succeeded := func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		apply()
		m.failures[key] = 0
		delete(m.givenUp, key)
	}
	switch fault {
	case faultOK:
		succeeded()
		return nil
	case faultFail:
		failed(false)
		return errors.New("transient failure")
	case faultPermanent:
		failed(true)
		return reconciler.Permanent(errors.New("permanent failure"))
	case faultDeferNil:
		return reconciler.RetryAfter(time.Millisecond, nil)
	case faultDeferErr:
		failed(false)
		return reconciler.RetryAfter(time.Millisecond, errors.New("busy"))
	case faultPanicking:
		failed(false)
		panic("model target panics")
	default: // faultOverdue
		failed(false)
		time.Sleep(modelTimeout * 3 / 2) // ignores ctx; the engine has given up on the result
		m.mu.Lock()
		apply()
		m.mu.Unlock()
		return nil
	}
}

type modelOps struct {
	m          *modelTarget
	maxRetries int
}

func (o modelOps) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *testObject) error {
	return o.m.do(ctx, obj.ID, obj.Value, o.maxRetries, func() { o.m.state[obj.ID] = obj.Value })
}

func (o modelOps) Delete(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *testObject) error {
	return o.m.do(ctx, obj.ID, "delete", o.maxRetries, func() { delete(o.m.state, obj.ID) })
}

func (o modelOps) Prune(_ context.Context, txn statedb.ReadTxn, objs iter.Seq2[*testObject, statedb.Revision]) error {
	o.m.mu.Lock()
	defer o.m.mu.Unlock()
	desired := map[string]bool{}
	for obj := range objs {
		desired[obj.ID] = true
	}
	for key := range o.m.state {
		if !desired[key] {
			delete(o.m.state, key)
			if o.m.givenUp[key] == "delete" {
				delete(o.m.givenUp, key)
			}
		}
	}
	o.m.prunes++
	return nil
}

func runModel(t *testing.T, seed uint64) {
	f, ctx := startFixture(t, 60*time.Second)
	rng := rand.New(rand.NewPCG(seed, 0x6d6f64656c))
	targets := map[string]*modelTarget{"a": newModelTarget(t, "a", seed), "b": newModelTarget(t, "b", seed)}
	recs := map[string]reconciler.Reconciler[*testObject]{}
	common := reconciler.Config[*testObject]{
		OperationTimeout: modelTimeout, RetryBackoffMin: time.Millisecond, RetryBackoffMax: 4 * time.Millisecond,
		RefreshInterval: reconciler.Off, FullReconciliationInterval: reconciler.Off, RoundSize: 5,
	}
	a := common
	a.Concurrency, a.MaxRetries = 4, modelMaxRetries
	recs["a"] = mustNew(t, f, statusSetConfig(f, "a", modelOps{targets["a"], modelMaxRetries}, a))
	recs["b"] = mustNew(t, f, statusSetConfig(f, "b", modelOps{targets["b"], 0}, common))
	syncTarget := newModelSyncTarget("s", seed)
	s := statusSetConfig(f, "s", nil, common)
	s.Operations, s.SyncOperations = nil, syncTarget
	s.SyncDebounce = reconciler.LeadingEdge(time.Millisecond) // many Syncs, each racing the writes
	syncRec := mustNew(t, f, s)
	f.markInit()

	live := map[string]string{} // the model of the table: key -> value
	version := 0
	for range 400 {
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
			statuses := reconciler.NewStatusSet()
			if old, _, found := f.table.Get(wtxn, idIndex.Query(key)); found {
				statuses = old.Statuses.Pending()
			}
			if _, _, err := f.table.Insert(wtxn, &testObject{ID: key, Value: live[key], Statuses: statuses}); err != nil {
				t.Fatal(err)
			}
		}
		wtxn.Commit()
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond) // let operations and retries interleave
	}

	// With no more changes, the faults go on for a while: both
	// reconcilers retry, each writing its statuses while the other's
	// retries run (the interleaving the StatusSet rule is about).
	time.Sleep(200 * time.Millisecond)

	// The faults stop; a prune settles the deletes the engine gave up on.
	for _, m := range targets {
		m.mu.Lock()
		m.faults = false
		m.mu.Unlock()
	}
	syncTarget.stopFaults()
	for name, r := range recs {
		if err := r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
			t.Fatalf("%s: %s", name, err)
		}
		m := targets[name]
		m.mu.Lock()
		before := m.prunes
		m.mu.Unlock()
		r.TriggerFullReconciliation()
		f.waitFor(ctx, t, name+"'s prune", func() bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.prunes > before
		})
		if err := r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
			t.Fatalf("%s after the prune: %s", name, err)
		}
	}
	if err := syncRec.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatalf("s: %s", err)
	}
	syncTarget.checkStatuses(t, f, live, syncRec)
	// A full Sync ends what a Permanent failure held (nothing changes
	// after it to start another Sync).
	before := syncRec.Status().LastFull.At
	syncRec.TriggerFullReconciliation()
	f.waitFor(ctx, t, "s's full Sync", func() bool {
		last := syncRec.Status().LastFull
		return last.At.After(before) && last.Error == ""
	})
	if err := syncRec.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatalf("s: %s", err)
	}
	checkModel(t, f, live, targets, recs, statusSetOf, nil)
	syncTarget.checkTarget(t, f, live)
}

// statusSetOf and statusOf read reconciler name's status in an object:
// from its StatusSet, or the object's own Status.
func statusSetOf(o *testObject, name string) reconciler.Status { return o.Statuses.Get(name) }
func statusOf(o *testObject, _ string) reconciler.Status       { return o.Status }

// checkModel checks the table and the targets against the model. owned,
// if set, names the keys this replica owns: the others are another's,
// and only counted as unowned.
func checkModel(t *testing.T, f *fixture, live map[string]string, targets map[string]*modelTarget, recs map[string]reconciler.Reconciler[*testObject],
	status func(*testObject, string) reconciler.Status, owned func(string) bool) {
	t.Helper()
	if owned == nil {
		owned = func(string) bool { return true }
	}
	for name, m := range targets {
		m.mu.Lock()
		var counts reconciler.ObjectCounts
		for key, value := range live {
			if !owned(key) {
				counts.Unowned++
				continue
			}
			st := status(f.get(key), name)
			switch st.Kind {
			case reconciler.StatusKindDone:
				counts.Done++
				if m.state[key] != value {
					t.Errorf("%s: %s is Done, but the target holds %q, want %q", name, key, m.state[key], value)
				}
			case reconciler.StatusKindError:
				counts.Error++
				if m.givenUp[key] != value {
					t.Errorf("%s: %s is Error (%s), but the model did not give up on %s (gave up on %q)", name, key, st.Error, value, m.givenUp[key])
				}
			default:
				t.Errorf("%s: %s is %s after settling", name, key, st.Kind)
			}
		}
		for key, value := range m.state {
			if _, ok := live[key]; !ok && owned(key) {
				t.Errorf("%s: %s=%s is in the target, but deleted", name, key, value)
			}
		}
		if len(m.overlapped) > 0 {
			t.Errorf("%s: operations overlapped on %v", name, m.overlapped)
		}
		t.Logf("%s: %d operation calls, %d given up, end state %+v", name, m.calls, len(m.givenUp), counts)
		m.mu.Unlock()
		if got := recs[name].Status().Objects; got != counts {
			t.Errorf("%s: Status().Objects = %+v, the table says %+v", name, got, counts)
		}
	}
}

// prunesNow is how many prunes the target has seen.
func (m *modelTarget) prunesNow() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.prunes
}
