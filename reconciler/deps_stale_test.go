package reconciler_test

import (
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/converge-go/converge/reconciler"
)

// TestDepsDeletedWaiterKeepsNothing: an object Blocked on a key that
// never comes (a file whose directory object is never written), then
// deleted, leaves nothing behind: what the reconciler keeps does not
// grow with the number of such objects. The growth is compared, per
// object, with objects that name no dependency, over enough objects that
// the heap's noise is a few bytes each.
func TestDepsDeletedWaiterKeepsNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 2 x 12000 insert-and-delete cycles")
	}
	const warmup, cycles = 2000, 10000
	growth := func(blocked bool) float64 {
		return heapGrowth(t, warmup, cycles, func(*fixture) {}, func(f *fixture, i int) {
			key, value := fmt.Sprintf("x%d", i), "v"
			if blocked {
				value = fmt.Sprintf("v>missing%d", i)
			}
			insert(t, f, pendingObject(key, value))
			synctest.Wait()
			if e := explainKey(t, f, key); blocked && e.State != reconciler.KeyBlocked {
				t.Fatalf("%s is %s, want Blocked", key, e.State)
			}
			deleteKeys(t, f, key)
			synctest.Wait()
		}, func(*fixture) {})
	}
	without, with := growth(false), growth(true)
	t.Logf("live heap growth per object: %.1f bytes with no dependency, %.1f Blocked on a key that never comes", without, with)
	if with-without > 16 {
		t.Errorf("objects Blocked on keys that never come, then deleted, keep %.1f bytes more each (%.1f against %.1f): "+
			"something kept for each is never let go", with-without, with, without)
	}
}
