package trickle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeChanger is a Changer whose changes take doneAfter to be Done. It
// records how many changes were in flight at once, and whether a change
// ever hit an object that already had one in flight.
type fakeChanger struct {
	doneAfter time.Duration
	fail      error // WaitDone's result

	mu          sync.Mutex
	version     uint64
	inFlight    map[int]bool
	maxInFlight int
	clash       error
}

func (f *fakeChanger) Touch(id int) (uint64, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inFlight[id] && f.clash == nil {
		f.clash = fmt.Errorf("object %d changed while a change to it was in flight", id)
	}
	f.inFlight[id] = true
	f.maxInFlight = max(f.maxInFlight, len(f.inFlight))
	f.version++
	return f.version, time.Now()
}

func (f *fakeChanger) WaitDone(_ context.Context, id int, _ uint64) error {
	time.Sleep(f.doneAfter)
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.inFlight, id)
	return f.fail
}

// TestOpenLoop checks that the trickle writes its changes without waiting
// for the earlier ones to be Done, measures every one, and never has two
// changes to one object in flight, even when the pool of objects is too
// small for the rate.
func TestOpenLoop(t *testing.T) {
	f := &fakeChanger{doneAfter: 5 * time.Millisecond, inFlight: map[int]bool{}}
	tr := New(f, 2000, DistinctIDs(rand.New(rand.NewPCG(1, 2)), 100, 4))
	if err := tr.Run(context.Background(), 40, nil); err != nil {
		t.Fatal(err)
	}
	m := tr.Measure()
	if m[Changes] != 40 {
		t.Errorf("%v changes measured, want 40", m[Changes])
	}
	if f.clash != nil {
		t.Error(f.clash)
	}
	if f.maxInFlight < 2 {
		t.Errorf("at most %d change in flight: the writer waited for Done", f.maxInFlight)
	}
	if m[P50] < 5 {
		t.Errorf("p50 %.3f ms, below the fake's 5 ms", m[P50])
	}
	if m[Waits] == 0 {
		t.Errorf("no change waited for one of 4 objects at 2000/s and 5 ms each")
	}
}

// TestMark checks that the changes committed after Mark are measured
// apart too: slow changes before it, fast ones after, and the p99 after it
// is the fast ones'.
func TestMark(t *testing.T) {
	f := &fakeChanger{doneAfter: 50 * time.Millisecond, inFlight: map[int]bool{}}
	tr := New(f, 1000, DistinctIDs(rand.New(rand.NewPCG(3, 4)), 100, 40))
	if err := tr.Run(context.Background(), 10, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.Measure()[AfterP99]; ok {
		t.Errorf("%s reported with no Mark", AfterP99)
	}
	tr.Mark()
	f.doneAfter = 0 // Run has returned: no observer reads it
	if err := tr.Run(context.Background(), 10, nil); err != nil {
		t.Fatal(err)
	}
	m := tr.Measure()
	if m[Changes] != 20 || m[AfterChanges] != 10 {
		t.Fatalf("%v changes, %v after the mark; want 20 and 10", m[Changes], m[AfterChanges])
	}
	if m[P99] < 50 || m[AfterP99] >= 50 {
		t.Errorf("p99 %.3f ms, after the mark %.3f ms: want the slow changes in the first only", m[P99], m[AfterP99])
	}
}

// TestStop checks that closing stop ends an unbounded run, which writes at
// least its first change and returns the observers' error.
func TestStop(t *testing.T) {
	errDone := errors.New("not done")
	f := &fakeChanger{fail: errDone, inFlight: map[int]bool{}}
	tr := New(f, 10, []int{1, 2, 3})
	stop := make(chan struct{})
	close(stop)
	if err := tr.Run(context.Background(), 0, stop); !errors.Is(err, errDone) {
		t.Fatalf("Run = %v, want the observer's %v", err, errDone)
	}
	if n := tr.Measure()[Changes]; n != 1 {
		t.Errorf("%v changes with stop closed at the start, want the first alone", n)
	}
}

// TestDistinctIDs checks that the trickle's objects are distinct and in
// the table, at the sizes the workloads use.
func TestDistinctIDs(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ n, k int }{{10, 10}, {1000, 7}, {1_000_000, 1000}} {
		ids := DistinctIDs(rnd, c.n, c.k)
		seen := map[int]bool{}
		for _, id := range ids {
			if id < 0 || id >= c.n || seen[id] {
				t.Fatalf("DistinctIDs(%d, %d): %d out of range or repeated", c.n, c.k, id)
			}
			seen[id] = true
		}
		if len(ids) != c.k {
			t.Errorf("DistinctIDs(%d, %d): %d ids", c.n, c.k, len(ids))
		}
	}
}

// TestPercentile checks the nearest rank at the edges.
func TestPercentile(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for p, want := range map[float64]float64{0: 1, 50: 5, 99: 10, 100: 10, 10: 1, 11: 2} {
		if got := Percentile(xs, p); got != want {
			t.Errorf("Percentile(1..10, %v) = %v, want %v", p, got, want)
		}
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Error("Percentile of nothing is not NaN")
	}
}
