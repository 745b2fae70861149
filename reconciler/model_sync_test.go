package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// modelSyncTarget is the whole-set reconciler's target in TestModel, with
// the model of what the engine must conclude:
//
//   - applied is the desired set as the engine believes it applied: the
//     snapshot of the last Sync that returned nil in time (less the
//     objects it failed with FailObjects). Every Sync's changes must list
//     every key on which its snapshot differs from applied, and the first
//     Sync of the run every object;
//   - givenUp holds the value of each object whose request a Permanent
//     failure ended: it must be Error at the end exactly there.
type modelSyncTarget struct {
	name       string
	rng        *rand.Rand
	mu         sync.Mutex
	faults     bool
	state      map[string]string // what the target holds
	applied    map[string]string // what the engine believes it holds (nil: nothing yet)
	givenUp    map[string]string
	running    bool
	syncs      int
	overlapped int
	uncovered  []string
}

func newModelSyncTarget(name string, seed uint64) *modelSyncTarget {
	return &modelSyncTarget{name: name, rng: rand.New(rand.NewPCG(seed, 0x73796e63)), faults: true,
		state: map[string]string{}, givenUp: map[string]string{}}
}

func (m *modelSyncTarget) Sync(ctx context.Context, txn statedb.ReadTxn, desired iter.Seq2[*testObject, statedb.Revision], changes iter.Seq[reconciler.Change[*testObject]]) error {
	snapshot, asking := map[string]string{}, []string{}
	for obj := range desired {
		snapshot[obj.ID] = obj.Value
		if obj.Statuses.Get(m.name).Kind != reconciler.StatusKindDone {
			asking = append(asking, obj.ID) // one of the Sync's requests
		}
	}
	m.mu.Lock()
	if m.running {
		m.overlapped++
	}
	m.running = true
	m.syncs++
	m.checkCovered(snapshot, changes)
	fault := faultOK
	if m.faults {
		fault = modelFault(m.rng.IntN(int(modelFaultCount) * 2))
		if fault >= modelFaultCount {
			fault = faultOK
		}
	}
	var failKeys []string // FailObjects, with a Permanent error when permanent
	permanent := m.rng.IntN(2) == 0
	if m.faults && fault == faultOK && len(snapshot) > 0 && m.rng.IntN(4) == 0 {
		keys := sortedKeys(snapshot)
		failKeys = append(failKeys, keys[m.rng.IntN(len(keys))])
	}
	latency := time.Duration(m.rng.IntN(2000)) * time.Microsecond
	m.mu.Unlock()
	time.Sleep(latency)
	defer func() {
		m.mu.Lock()
		m.running = false
		m.mu.Unlock()
	}()
	switch fault {
	case faultPanicking:
		panic("model sync target panics")
	case faultOverdue:
		// Ignores ctx and applies late: the engine has given up on it.
		time.Sleep(modelTimeout * 3 / 2)
		m.mu.Lock()
		m.state = maps.Clone(snapshot)
		m.mu.Unlock()
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.outcome(fault, snapshot, asking, failKeys, permanent)
}

// outcome records what a Sync that returns in time did, and returns its
// error.
func (m *modelSyncTarget) outcome(fault modelFault, snapshot map[string]string, asking, failKeys []string, permanent bool) error {
	switch fault {
	case faultFail:
		return errors.New("sync failed")
	case faultPermanent:
		for _, k := range asking {
			m.givenUp[k] = snapshot[k]
		}
		return reconciler.Permanent(errors.New("sync failed for good"))
	case faultDeferNil:
		return reconciler.RetryAfter(time.Millisecond, nil)
	case faultDeferErr:
		return reconciler.RetryAfter(time.Millisecond, errors.New("busy"))
	}
	m.apply(snapshot, failKeys)
	for _, k := range asking {
		delete(m.givenUp, k)
	}
	if len(failKeys) == 0 {
		return nil
	}
	var failures []reconciler.ObjectFailure[*testObject]
	for _, k := range failKeys {
		err := errors.New("rejected")
		if permanent {
			err = reconciler.Permanent(err)
			m.givenUp[k] = snapshot[k]
		}
		failures = append(failures, reconciler.ObjectFailure[*testObject]{Object: &testObject{ID: k}, Err: err})
	}
	return reconciler.FailObjects(failures...)
}

// apply records a Sync that returned in time having applied snapshot but
// for the keys in failed, which keep what the target had.
func (m *modelSyncTarget) apply(snapshot map[string]string, failed []string) {
	next := maps.Clone(snapshot)
	for _, k := range failed {
		if v, ok := m.state[k]; ok {
			next[k] = v
		} else {
			delete(next, k)
		}
	}
	m.state = next
	m.applied = maps.Clone(next)
}

// checkCovered checks that changes list every key on which snapshot
// differs from what the engine believes applied.
func (m *modelSyncTarget) checkCovered(snapshot map[string]string, changes iter.Seq[reconciler.Change[*testObject]]) {
	listed := map[string]bool{}
	for ch := range changes {
		listed[ch.Object.ID] = true
	}
	if m.applied == nil {
		for k := range snapshot {
			if !listed[k] {
				m.uncovered = append(m.uncovered, fmt.Sprintf("sync %d (the first): %s missing", m.syncs, k))
			}
		}
		return
	}
	for k, v := range snapshot {
		if old, ok := m.applied[k]; (!ok || old != v) && !listed[k] {
			m.uncovered = append(m.uncovered, fmt.Sprintf("sync %d: %s=%s missing", m.syncs, k, v))
		}
	}
	for k := range m.applied {
		if _, ok := snapshot[k]; !ok && !listed[k] {
			m.uncovered = append(m.uncovered, fmt.Sprintf("sync %d: delete of %s missing", m.syncs, k))
		}
	}
}

func (m *modelSyncTarget) stopFaults() {
	m.mu.Lock()
	m.faults = false
	m.mu.Unlock()
}

// checkStatuses checks, once the faults stopped and the waits returned,
// that every live object is Done, or Error exactly where the model gave
// up on it, and that Status() counts what the table says.
func (m *modelSyncTarget) checkStatuses(t *testing.T, f *fixture, live map[string]string, rec reconciler.Reconciler[*testObject]) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	var counts reconciler.ObjectCounts
	for key, value := range live {
		st := f.get(key).Statuses.Get(m.name)
		switch st.Kind {
		case reconciler.StatusKindDone:
			counts.Done++
		case reconciler.StatusKindError:
			counts.Error++
			if m.givenUp[key] != value {
				t.Errorf("%s: %s is Error (%s), but the model did not give up on %s (gave up on %q)", m.name, key, st.Error, value, m.givenUp[key])
			}
		default:
			t.Errorf("%s: %s is %s after settling", m.name, key, st.Kind)
		}
	}
	t.Logf("%s: %d Syncs, end state %+v", m.name, m.syncs, counts)
	if got := rec.Status().Objects; got != counts {
		t.Errorf("%s: Status().Objects = %+v, the table says %+v", m.name, got, counts)
	}
}

// checkTarget checks, after a full Sync with no faults, that every live
// object is Done and the target and the last Sync's desired set equal
// the table, and what held for every Sync: none overlapped, and each one's
// changes covered its snapshot.
func (m *modelSyncTarget) checkTarget(t *testing.T, f *fixture, live map[string]string) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for key := range live {
		if st := f.get(key).Statuses.Get(m.name); st.Kind != reconciler.StatusKindDone {
			t.Errorf("%s: %s is %s after a full Sync", m.name, key, st.Kind)
		}
	}
	if !maps.Equal(m.state, live) {
		t.Errorf("%s: the target holds %v, the table %v", m.name, m.state, live)
	}
	if !maps.Equal(m.applied, m.state) {
		t.Errorf("%s: the last Sync's desired set %v differs from the target %v", m.name, m.applied, m.state)
	}
	if m.overlapped > 0 {
		t.Errorf("%s: %d Syncs overlapped", m.name, m.overlapped)
	}
	for _, u := range m.uncovered {
		t.Errorf("%s: a Sync's changes do not cover its snapshot: %s", m.name, u)
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
