package reconciler_test

import (
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"

	"github.com/converge-go/converge/reconciler"
)

// TestDepsLongBlockedKeyKeepsNoGarbage: while one key stays Blocked (its
// dependency never comes: a file whose directory object is missing),
// other keys are blocked and released, then deleted, again and again.
// What the reconciler keeps must not grow with the number of releases:
// a released and deleted key leaves nothing behind. The growth is
// compared with the same cycles without the stuck key, per cycle, over
// enough cycles that the heap's noise is a few bytes a cycle.
func TestDepsLongBlockedKeyKeepsNoGarbage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 2 x 12000 block-and-release cycles")
	}
	// (It failed at first, about 117 bytes a cycle: the list of Blocked
	// rows by age was trimmed only at its head, which the stuck key held.)
	const warmup, cycles = 2000, 10000
	growth := func(stuck bool) float64 {
		return heapGrowth(t, warmup, cycles, func(f *fixture) {
			if stuck {
				insert(t, f, pendingObject("stuck", "v>missing"))
				synctest.Wait()
			}
		}, func(f *fixture, i int) {
			dep, dependent := fmt.Sprintf("d%d", i), fmt.Sprintf("x%d", i)
			// The dependent first: it is read first, and Blocked.
			insert(t, f, pendingObject(dependent, "v>"+dep), pendingObject(dep, "d"))
			synctest.Wait()
			deleteKeys(t, f, dependent, dep)
			synctest.Wait()
		}, func(f *fixture) {
			if e := explainKey(t, f, "stuck"); stuck && e.State != reconciler.KeyBlocked {
				t.Fatalf("the stuck key is %s, want Blocked", e.State)
			}
		})
	}
	without, with := growth(false), growth(true)
	t.Logf("live heap growth per cycle: %.1f bytes without a long-blocked key, %.1f with one", without, with)
	if with-without > 16 {
		t.Errorf("with one key Blocked for good, the heap grows %.1f bytes more per block-and-release cycle (%.1f against %.1f): "+
			"something kept for each released key is never let go", with-without, with, without)
	}
}

// heapGrowth returns how much the live heap grows per cycle, in a bubble
// with dependencies: after setup, cycle runs warmup times, then cycles
// times, measured; after looks at the end. The target's history and the
// operations' record are dropped after each cycle: they are the test's.
func heapGrowth(t *testing.T, warmup, cycles int, setup func(*fixture), cycle func(*fixture, int), after func(*fixture)) float64 {
	var perCycle float64
	inBubble(t, withDeps, func(f *fixture, ops *timedOps) {
		tg := f.target("")
		setup(f)
		run := func(i int) {
			cycle(f, i)
			tg.ClearHistory()
			ops.mu.Lock()
			ops.at = ops.at[:0]
			ops.mu.Unlock()
		}
		for i := range warmup {
			run(i)
		}
		before := liveHeapBytes()
		for i := range cycles {
			run(warmup + i)
		}
		perCycle = float64(int64(liveHeapBytes())-int64(before)) / float64(cycles)
		after(f)
	})
	return perCycle
}

func liveHeapBytes() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
