package reconciler_test

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"
	statedbindex "github.com/cilium/statedb/index"

	"github.com/converge-go/converge/reconciler"
)

// TestModelRequires draws objects that require rows of another table
// (Config.Requires: devices, up) and depend on each other (DependsOn,
// acyclic: on lower keys), and writes, changes and deletes objects and
// devices at random, in bursts, while the target fails half of its calls
// and takes random time, with up to 4 workers. Devices come in three
// kinds: stable ones, once up never changed again; flaky ones, brought
// up, down, deleted and back; and ones never written. The target checks,
// as each Update starts:
//
//   - it requires no device that was never written;
//   - every stable device it requires is in the table and up (the gate
//     saw it so, and it stays so);
//   - no key it depends on is absent from the target or busy.
//
// Once the faults stop and everything settles: every key whose
// dependencies are Done and whose devices are all up is Done with its
// value in the target; every other key is Done (a row only gates: its
// device may have gone since) or Blocked, and then Explain names a
// dependency not Done or a device missing or down.
//
// The seed is printed; CONVERGE_MODEL_SEED replays one.
func TestModelRequires(t *testing.T) {
	for _, seed := range modelSeeds(t, []uint64{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("replay: CONVERGE_MODEL_SEED=%d go test -race -run 'TestModelRequires' ./reconciler", seed)
			inModelBubble(t, func(t *testing.T) { runRequiresModel(t, seed) })
		})
	}
}

const (
	reqModelKeys   = 10
	reqModelStable = 3 // d0..d2
	reqModelFlaky  = 3 // d3..d5
	reqModelNever  = 2 // d6, d7
)

func reqDevice(i int) string { return fmt.Sprintf("d%d", i) }

func reqStable(name string) bool {
	return slices.Contains([]string{"d0", "d1", "d2"}, name)
}

func reqNever(name string) bool { return name == "d6" || name == "d7" }

// reqModelOps is the model's target: depModelOps' rules, and a device
// check.
type reqModelOps struct {
	m    *depTarget
	db   *statedb.DB
	devs statedb.Table[*device]
}

func (o reqModelOps) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *testObject) error {
	m := o.m
	fail, latency := m.begin(obj.ID, func() string {
		txn := o.db.ReadTxn()
		for _, d := range requiredDevices(obj) {
			name := string(d)
			dev, _, found := o.devs.Get(txn, deviceIndex.Query(name))
			switch {
			case reqNever(name):
				return fmt.Sprintf("update of %s (%s) started, requiring %s, never written", obj.ID, obj.Value, name)
			case reqStable(name) && (!found || !dev.Up):
				return fmt.Sprintf("update of %s (%s) started while its stable device %s is missing (%v) or down", obj.ID, obj.Value, name, !found)
			}
		}
		for _, d := range dependsOn(obj) {
			if _, ok := m.state[string(d)]; !ok || m.running[string(d)] {
				return fmt.Sprintf("update of %s (%s) started while its dependency %s is absent or busy", obj.ID, obj.Value, d)
			}
		}
		return ""
	})
	time.Sleep(latency)
	return m.end(obj.ID, fail, func() { m.state[obj.ID] = obj.Value })
}

func (o reqModelOps) Delete(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	return depModelOps{o.m}.Delete(ctx, txn, rev, obj)
}

func (o reqModelOps) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*testObject, statedb.Revision]) error {
	return nil
}

// reqModelObject draws an object's value: up to two devices (any kind)
// and up to two dependencies on lower keys.
func reqModelObject(rng *rand.Rand, k, version int) string {
	var devs, deps []string
	for range rng.IntN(3) {
		devs = append(devs, reqDevice(rng.IntN(reqModelStable+reqModelFlaky+reqModelNever)))
	}
	for range rng.IntN(3) {
		if k > 0 {
			deps = append(deps, fmt.Sprintf("k%02d", rng.IntN(k)))
		}
	}
	v := fmt.Sprintf("v%d", version)
	if len(devs) > 0 {
		v += "@" + strings.Join(devs, ",")
	}
	if len(deps) > 0 {
		v += ">" + strings.Join(deps, ",")
	}
	return v
}

// reqModelDevices changes a device at random: a stable one is only ever
// brought up; a flaky one is brought up, down, or deleted.
func reqModelDevices(rng *rand.Rand, f *fixture, devs statedb.RWTable[*device]) {
	wtxn := f.db.WriteTxn(devs)
	defer wtxn.Commit()
	i := rng.IntN(reqModelStable + reqModelFlaky)
	name := reqDevice(i)
	if reqStable(name) {
		devs.Insert(wtxn, &device{Name: name, Up: true})
		return
	}
	switch rng.IntN(3) {
	case 0:
		devs.Delete(wtxn, &device{Name: name})
	default:
		devs.Insert(wtxn, &device{Name: name, Up: rng.IntN(2) == 0})
	}
}

func runRequiresModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x72657173))
	m := &depTarget{rng: rand.New(rand.NewPCG(seed, 1)), faults: true, state: map[string]string{}, running: map[string]bool{}}
	f := startedFixture(t)
	devs := newDeviceTable(t, f, "devices")
	cfg := reconciler.Config[*testObject]{
		RetryBackoffMin: time.Millisecond, RetryBackoffMax: 4 * time.Millisecond, RoundSize: 5,
		RefreshInterval: reconciler.Off, FullReconciliationInterval: reconciler.Off,
		Concurrency: 1 + rng.IntN(4), DependsOn: dependsOn,
		Requires: []reconciler.Requirement[*testObject]{reconciler.Requires(devs, requiredDevices, deviceUp)},
	}
	if rng.IntN(2) == 0 {
		// One target at a time: rows wait Queued, where a device may go.
		cfg.TargetKey, cfg.TargetConcurrency = func(*testObject) string { return "one" }, 1
	}
	r := mustNew(t, f, testConfig(f, reqModelOps{m: m, db: f.db, devs: devs}, cfg))
	f.markInit()
	live := map[string]string{}
	version := 0
	var written statedb.Revision
	for range 250 {
		if rng.IntN(3) == 0 {
			reqModelDevices(rng, f, devs)
		}
		keys := []int{rng.IntN(reqModelKeys)}
		if rng.IntN(20) == 0 {
			keys = rng.Perm(reqModelKeys)[:1+rng.IntN(reqModelKeys)]
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
			live[key] = reqModelObject(rng, k, version)
			f.table.Insert(wtxn, &testObject{ID: key, Value: live[key], Status: reconciler.StatusPending()})
		}
		written = f.table.Revision(wtxn)
		wtxn.Commit()
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
	}
	m.mu.Lock()
	m.faults = false
	m.mu.Unlock()
	// The devices change last, after every object was written: what
	// waits for them is released by their changes alone.
	for range 2 * (reqModelStable + reqModelFlaky) {
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		reqModelDevices(rng, f, devs)
	}
	settleDepsModel(t, r, written)
	checkRequiresModel(t, f, r, m, devs, live)
}

// checkRequiresModel checks the settled state against live and the
// devices as they are.
func checkRequiresModel(t *testing.T, f *fixture, r reconciler.Reconciler[*testObject], m *depTarget, devs statedb.Table[*device], live map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, v := range m.violations {
		t.Error(v)
	}
	txn := f.db.ReadTxn()
	up := func(name string) bool {
		d, _, found := devs.Get(txn, deviceIndex.Query(name))
		return found && d.Up
	}
	var table []string
	for d := range devs.All(txn) {
		table = append(table, fmt.Sprintf("%s:%v", d.Name, d.Up))
	}
	for k, v := range live {
		obj := &testObject{Value: v}
		st := tableStatus(f, k)
		ready := true
		for _, d := range dependsOn(obj) {
			ready = ready && tableStatus(f, string(d)).Kind == reconciler.StatusKindDone
		}
		for _, d := range requiredDevices(obj) {
			ready = ready && up(string(d))
		}
		e, err := r.Explain(context.Background(), []byte(k))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case st.Kind == reconciler.StatusKindDone:
			if m.state[k] != v {
				t.Errorf("%s (%s) is Done, but the target holds %q", k, v, m.state[k])
			}
		case ready:
			t.Errorf("%s (%s): its dependencies are Done and its devices up, yet it is %s %q\n%s\ndevices %v", k, v, st.Kind, st.Error, e, table)
		case e.State != reconciler.KeyBlocked || !blockedOnSomethingMissing(e.Reason, obj, f, up):
			t.Errorf("%s (%s) waits: want Blocked on a dependency not Done or a device down or missing\n%s\ndevices %v", k, v, e, table)
		}
	}
	checkDeletedKept(t, m, live, func(k string) reconciler.Explanation {
		e, _ := r.Explain(context.Background(), []byte(k))
		return e
	})
}

// blockedOnSomethingMissing reports whether Explain's reason names a
// dependency of obj not Done, or a device obj requires that is not up.
func blockedOnSomethingMissing(reason string, obj *testObject, f *fixture, up func(string) bool) bool {
	what, _, _ := strings.Cut(strings.TrimPrefix(reason, "blocked on "), ":")
	if name, ok := strings.CutPrefix(what, "devices row "); ok {
		return slices.ContainsFunc(requiredDevices(obj), func(d statedbindex.Key) bool { return string(d) == name }) && !up(name)
	}
	return slices.ContainsFunc(dependsOn(obj), func(d statedbindex.Key) bool { return string(d) == what }) &&
		tableStatus(f, what).Kind != reconciler.StatusKindDone
}
