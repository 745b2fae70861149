package reconciler

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestBusyListFollowsBusy picks items up and frees them in random order and
// checks after every step that busyList holds exactly the busy items, each
// at the index it records: report's watermarks walk busyList, so an item
// missing from it would let WaitUntilReconciled return too early.
func TestBusyListFollowsBusy(t *testing.T) {
	l := &loop[int]{busy: map[string]*item[int]{}}
	rng := rand.New(rand.NewPCG(7, 8))
	var picked []*item[int]
	next := 0
	for step := range 5000 {
		if len(picked) == 0 || rng.IntN(2) == 0 {
			it := &item[int]{key: fmt.Sprint(next)}
			next++
			l.enqueue(it)
			picked = append(picked, it)
		} else {
			i := rng.IntN(len(picked))
			l.unbusy(picked[i])
			picked = append(picked[:i], picked[i+1:]...)
		}
		if len(l.busyList) != len(l.busy) || len(l.busy) != len(picked) {
			t.Fatalf("step %d: %d in busyList, %d busy, want %d", step, len(l.busyList), len(l.busy), len(picked))
		}
		for i, it := range l.busyList {
			if it.busyAt != i {
				t.Fatalf("step %d: item %s at %d says %d", step, it.key, i, it.busyAt)
			}
			if l.busy[it.key] != it {
				t.Fatalf("step %d: item %s in busyList but not busy", step, it.key)
			}
		}
	}
}
