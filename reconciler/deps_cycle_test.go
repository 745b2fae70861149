package reconciler_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// Cycles the walk that finds one could miss: what the model test found
// (TestModelDependencies, seeds 2913 and 5108), each made deterministic.

// wantCycleError fails unless key carries an Error naming a dependency
// cycle through it, and Explain says it is given up on.
func wantCycleError(t *testing.T, f *fixture, key string) {
	t.Helper()
	st := tableStatus(f, key)
	names := strings.Split(strings.TrimPrefix(st.Error, "dependency cycle: "), " -> ")
	if st.Kind != reconciler.StatusKindError || !strings.HasPrefix(st.Error, "dependency cycle: ") || !slices.Contains(names, key) {
		t.Fatalf("%s: %s %q, want an Error naming a cycle through it", key, st.Kind, st.Error)
	}
	if e := explainKey(t, f, key); e.State != reconciler.KeyGivenUp {
		t.Fatalf("Explain %s: %s %q", key, e.State, e.Reason)
	}
}

// TestCycleEveryMemberOfTheComponent: the walk that finds a cycle stops
// at the first; a key on another cycle the same change closes, Blocked on
// something else too (a key not in the table), still gets its cycle
// error: every key of the component is on a cycle.
func TestCycleEveryMemberOfTheComponent(t *testing.T) {
	inBubble(t, withDeps, func(f *fixture, ops *timedOps) {
		tg := f.target("")
		// q2 closes q -> q2 -> q (the walk's first find) and q2 -> p -> q -> q2.
		insert(t, f, pendingObject("p", "v>missing,q"), pendingObject("q", "v>q2"), pendingObject("q2", "v>p,q"))
		synctest.Wait()
		if h := tg.History(); len(h) != 0 {
			t.Fatalf("keys on a cycle attempted: %v", h)
		}
		for _, k := range []string{"p", "q", "q2"} {
			wantCycleError(t, f, k)
		}
	})
}

// TestCycleThroughKeyReleasedBefore: a key given up on for a cycle keeps
// naming what it depends on when that is Done and releases its waiters,
// so a later change that closes a longer cycle through it is found.
func TestCycleThroughKeyReleasedBefore(t *testing.T) {
	inBubble(t, withDeps, func(f *fixture, ops *timedOps) {
		// First one object: the run has begun (what is in the table as it
		// begins counts as applied), so that nothing applied names z.
		insert(t, f, pendingObject("w", "v"))
		synctest.Wait()
		insert(t, f, pendingObject("s", "v>s,z"), pendingObject("z", "v"))
		synctest.Wait()
		wantCycleError(t, f, "s") // s depends on itself
		if st := tableStatus(f, "z"); st.Kind != reconciler.StatusKindDone {
			t.Fatalf("z: %s %q", st.Kind, st.Error)
		}
		insert(t, f, pendingObject("z", "v2")) // Done again: it releases what waits for it
		synctest.Wait()
		insert(t, f, pendingObject("y", "v>s"))
		synctest.Wait()
		insert(t, f, pendingObject("z", "v>y")) // z -> y -> s -> z
		synctest.Wait()
		for _, k := range []string{"z", "y"} {
			wantCycleError(t, f, k)
		}
	})
}

// TestQueuedKeyOnNewCycleIsNotAttempted: a key queued with its
// dependencies Done, put on a cycle by another key's change before a
// worker takes it, is not attempted: it gets the cycle error, although
// the key that closed the cycle, while its own cycle Error is being
// written, is in no waiting list. (With a waiting order, Queued keys wait
// for a free worker in the request table; in arrival order they are
// handed to the workers' queue at once.)
func TestQueuedKeyOnNewCycleIsNotAttempted(t *testing.T) {
	inBubble(t, func(cfg *reconciler.Config[*testObject]) {
		withDeps(cfg)
		cfg.Concurrency = 1
		cfg.Priority = func(*testObject) int { return 0 }
	}, func(f *fixture, ops *timedOps) {
		tg := f.target("")
		insert(t, f, pendingObject("x", "v"), pendingObject("d", "v>x"))
		synctest.Wait()
		// The one worker and the pool's lookahead (2) are taken.
		slow := []string{"slow1", "slow2", "slow3"}
		for _, k := range slow {
			tg.SetFault(k, fake.Fault{Mode: fake.ModeStuck})
			insert(t, f, pendingObject(k, "v"))
		}
		synctest.Wait()
		insert(t, f, pendingObject("r", "v>d")) // queued: d is Done
		synctest.Wait()
		insert(t, f, pendingObject("x", "v>r")) // x -> r -> d -> x
		synctest.Wait()
		for _, k := range slow {
			tg.Heal(k)
		}
		synctest.Wait()
		for _, h := range tg.History() {
			if h == "update(r)" {
				t.Fatalf("r attempted on a cycle: %v", tg.History())
			}
		}
		for _, k := range []string{"x", "r"} {
			wantCycleError(t, f, k)
		}
	})
}

// TestCycleErrorNamesItsOwnCycle: a key the found cycle does not take
// gets a cycle through itself, its error naming the first keys and
// counting the rest, as a found cycle's does.
func TestCycleErrorNamesItsOwnCycle(t *testing.T) {
	inBubble(t, withDeps, func(f *fixture, ops *timedOps) {
		// c0 -> c1 -> ... -> c9 -> c0, and c5 -> c0: read last, c0 closes
		// both; the walk finds c0 .. c5 first.
		var objs []*testObject
		for i := 1; i <= 9; i++ {
			deps := fmt.Sprintf("c%d", (i+1)%10)
			if i == 5 {
				deps = "c6,c0"
			}
			objs = append(objs, pendingObject(fmt.Sprintf("c%d", i), "v>"+deps))
		}
		insert(t, f, append(objs, pendingObject("c0", "v>c1"))...)
		synctest.Wait()
		if st := tableStatus(f, "c0"); st.Error != "dependency cycle: c0 -> c1 -> c2 -> c3 -> c4 -> c5 -> c0" {
			t.Fatalf("c0: %q", st.Error)
		}
		if st := tableStatus(f, "c6"); st.Error != "dependency cycle: c6 -> c7 -> c8 -> c9 -> c0 -> ... (5 more) -> c6" {
			t.Fatalf("c6: %q", st.Error)
		}
		for i := range 10 {
			wantCycleError(t, f, fmt.Sprintf("c%d", i))
		}
	})
}
