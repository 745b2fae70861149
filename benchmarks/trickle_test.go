package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/cilium/statedb"
)

// fakeRig is a rig whose changes take doneAfter to be Done. It records
// how many changes were in flight at once, and whether a change ever hit
// an object that already had one in flight.
type fakeRig struct {
	doneAfter time.Duration

	mu          sync.Mutex
	rev         statedb.Revision
	inFlight    map[int]bool
	maxInFlight int
	clash       error
}

func (f *fakeRig) start(context.Context) error           { return nil }
func (f *fakeRig) insertPending(int, int)                {}
func (f *fakeRig) waitAllDone(context.Context) error     { return nil }
func (f *fakeRig) waitNonePending(context.Context) error { return nil }
func (f *fakeRig) stop() error                           { return nil }

func (f *fakeRig) touch(id int) (statedb.Revision, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inFlight[id] && f.clash == nil {
		f.clash = fmt.Errorf("object %d changed while a change to it was in flight", id)
	}
	f.inFlight[id] = true
	f.maxInFlight = max(f.maxInFlight, len(f.inFlight))
	f.rev++
	return f.rev, time.Now()
}

func (f *fakeRig) waitObjectDone(_ context.Context, id int, _ statedb.Revision) error {
	time.Sleep(f.doneAfter)
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.inFlight, id)
	return nil
}

// TestTrickleOpenLoop checks that the trickle writes its changes without
// waiting for the earlier ones to be Done, measures every one, and never
// has two changes to one object in flight, even when the pool of objects
// is too small for the rate.
func TestTrickleOpenLoop(t *testing.T) {
	f := &fakeRig{doneAfter: 5 * time.Millisecond, inFlight: map[int]bool{}}
	tr := newTrickle(f, 2000, distinctIDs(rand.New(rand.NewPCG(1, 2)), 100, 4))
	if err := tr.run(context.Background(), 40, nil); err != nil {
		t.Fatal(err)
	}
	m := tr.measure()
	if m["changes"] != 40 {
		t.Errorf("%v changes measured, want 40", m["changes"])
	}
	if f.clash != nil {
		t.Error(f.clash)
	}
	if f.maxInFlight < 2 {
		t.Errorf("at most %d change in flight: the writer waited for Done", f.maxInFlight)
	}
	if m[metricP50] < 5 {
		t.Errorf("p50 %.3f ms, below the fake's 5 ms", m[metricP50])
	}
	if m["waits"] == 0 {
		t.Errorf("no change waited for one of 4 objects at 2000/s and 5 ms each")
	}
}

// TestDistinctIDs checks that the trickle's objects are distinct and in
// the table, at the sizes the workloads use.
func TestDistinctIDs(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ n, k int }{{10, 10}, {1000, 7}, {1_000_000, 1000}} {
		ids := distinctIDs(rnd, c.n, c.k)
		seen := map[int]bool{}
		for _, id := range ids {
			if id < 0 || id >= c.n || seen[id] {
				t.Fatalf("distinctIDs(%d, %d): %d out of range or repeated", c.n, c.k, id)
			}
			seen[id] = true
		}
		if len(ids) != c.k {
			t.Errorf("distinctIDs(%d, %d): %d ids", c.n, c.k, len(ids))
		}
	}
}
