package reconciler_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	statedbindex "github.com/cilium/statedb/index"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// The tests' objects name their dependencies in their value, after a
// '>': "v>a,b" depends on a and b.
func dependsOn(o *testObject) []statedbindex.Key {
	_, deps, ok := strings.Cut(o.Value, ">")
	if !ok || deps == "" {
		return nil
	}
	var keys []statedbindex.Key
	for d := range strings.SplitSeq(deps, ",") {
		keys = append(keys, statedbindex.String(d))
	}
	return keys
}

func withDeps(cfg *reconciler.Config[*testObject]) { cfg.DependsOn = dependsOn }

// explainKey asks the test reconciler where key stands.
func explainKey(t *testing.T, f *fixture, key string) reconciler.Explanation {
	t.Helper()
	r, err := f.reconciler("")
	if err != nil {
		t.Fatal(err)
	}
	e, err := r.Explain(context.Background(), []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func tableStatus(f *fixture, key string) reconciler.Status {
	if obj := f.get(key); obj != nil {
		return obj.Status
	}
	return reconciler.Status{}
}

// TestDependencyGates: an Update starts only once every key it depends on
// is in the table and Done; until then it is Blocked (no attempt, no
// failure), and Explain names the dependency and its state. The release
// takes no time: the dependent's Update starts in the step that commits
// its dependency's Done, with no polling delay.
func TestDependencyGates(t *testing.T) {
	inBubble(t, withDeps, func(f *fixture, ops *timedOps) {
		tg := f.target("")
		insert(t, f, pendingObject("file", "v>dir"))
		synctest.Wait()
		time.Sleep(time.Hour) // nothing polls: an hour brings no attempt
		synctest.Wait()
		if h := tg.History(); len(h) != 0 {
			t.Fatalf("operations ran for a key whose dependency is not in the table: %v", h)
		}
		e := explainKey(t, f, "file")
		if e.State != reconciler.KeyBlocked || e.Reason != `blocked on dir: not in the table` {
			t.Fatalf("Explain of a blocked key: %s %q", e.State, e.Reason)
		}
		if e.Attempts != 0 || e.LastError != "" {
			t.Fatalf("a blocked key counts as failing: %+v", e)
		}
		r, _ := f.reconciler("")
		if s := r.Status(); s.Blocked != 1 || s.Objects.Error != 0 || s.Retries != 0 {
			t.Fatalf("Status: blocked %d, errors %d, retries %d; want 1, 0, 0", s.Blocked, s.Objects.Error, s.Retries)
		}

		// The dependency fails: still blocked, now on its Error.
		tg.SetFault("dir", fake.Fault{Mode: fake.ModePermanent})
		insert(t, f, pendingObject("dir", "d"))
		synctest.Wait()
		if e := explainKey(t, f, "file"); e.State != reconciler.KeyBlocked || !strings.HasPrefix(e.Reason, "blocked on dir: Error: ") {
			t.Fatalf("Explain, dependency failing: %s %q", e.State, e.Reason)
		}
		if got := tg.History(); !slices.Equal(got, []string{"update(dir) fail"}) && len(got) != 1 {
			t.Fatalf("history %v", got)
		}

		// It is healed and changed: its Done releases the file at once.
		tg.Heal("dir")
		start := time.Now()
		insert(t, f, pendingObject("dir", "d2"))
		synctest.Wait()
		if tableStatus(f, "file").Kind != reconciler.StatusKindDone {
			t.Fatalf("file not Done after its dependency: %v", explainKey(t, f, "file"))
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("release took %s of bubble time: something polled", d)
		}
		h := tg.History()
		if i, j := slices.Index(h, "update(dir)"), slices.Index(h, "update(file)"); i < 0 || j < i {
			t.Fatalf("file updated before its dependency: %v", h)
		}
	})
}

func deleteKeys(t *testing.T, f *fixture, keys ...string) {
	t.Helper()
	wtxn := f.db.WriteTxn(f.table)
	for _, k := range keys {
		if _, _, err := f.table.Delete(wtxn, &testObject{ID: k}); err != nil {
			t.Fatal(err)
		}
	}
	wtxn.Commit()
}

// deletesOf returns the target's successful deletes, in order.
func deletesOf(tg *fake.Target) []string {
	var out []string
	for _, h := range tg.History() {
		if strings.HasPrefix(h, "delete(") && !strings.HasSuffix(h, " fail") {
			out = append(out, strings.TrimSuffix(strings.TrimPrefix(h, "delete("), ")"))
		}
	}
	return out
}

// TestDeletesLeavesFirst: a tree deleted in one transaction is deleted
// from the target leaves first, even with many workers; each Delete
// starts only once every object that depended on it is deleted.
func TestDeletesLeavesFirst(t *testing.T) {
	inBubble(t, func(cfg *reconciler.Config[*testObject]) {
		withDeps(cfg)
		cfg.Concurrency = 8
	}, func(f *fixture, ops *timedOps) {
		tg := f.target("")
		tg.SetLatency(func() time.Duration { return time.Millisecond })
		// root <- a, b; a <- a1, a2; b <- b1
		objs := []*testObject{pendingObject("root", "r"), pendingObject("a", "v>root"), pendingObject("b", "v>root"),
			pendingObject("a1", "v>a"), pendingObject("a2", "v>a"), pendingObject("b1", "v>b,a")}
		insert(t, f, objs...)
		synctest.Wait()
		time.Sleep(time.Second)
		synctest.Wait()
		for _, o := range objs {
			if k := tableStatus(f, o.ID).Kind; k != reconciler.StatusKindDone {
				t.Fatalf("%s is %s", o.ID, k)
			}
		}
		deleteKeys(t, f, "root", "a", "b", "a1", "a2", "b1")
		synctest.Wait()
		time.Sleep(time.Second)
		synctest.Wait()
		got := deletesOf(tg)
		pos := map[string]int{}
		for i, k := range got {
			pos[k] = i
		}
		if len(got) != 6 {
			t.Fatalf("deletes %v, want all 6", got)
		}
		for _, o := range objs {
			for _, d := range dependsOn(o) {
				if pos[o.ID] > pos[string(d)] {
					t.Errorf("%s deleted before %s, which depended on it: %v", d, o.ID, got)
				}
			}
		}
	})
}

// TestDependentKeepsDeleteBlocked: a key deleted while an object that
// depends on it stays in the table keeps its Delete blocked, and Explain
// says by whom; deleting the dependent releases it.
func TestDependentKeepsDeleteBlocked(t *testing.T) {
	inBubble(t, withDeps, func(f *fixture, ops *timedOps) {
		tg := f.target("")
		insert(t, f, pendingObject("dir", "d"), pendingObject("file", "v>dir"))
		synctest.Wait()
		deleteKeys(t, f, "dir")
		synctest.Wait()
		time.Sleep(time.Hour)
		synctest.Wait()
		if d := deletesOf(tg); len(d) != 0 {
			t.Fatalf("deleted %v while a dependent is in the target", d)
		}
		e := explainKey(t, f, "dir")
		if e.State != reconciler.KeyBlocked || !e.Deleted ||
			e.Reason != "its Delete waits for 1 object(s) that depend on it to be deleted from the target: file" {
			t.Fatalf("Explain: %s deleted=%v %q", e.State, e.Deleted, e.Reason)
		}
		deleteKeys(t, f, "file")
		synctest.Wait()
		if got := deletesOf(tg); !slices.Equal(got, []string{"file", "dir"}) {
			t.Fatalf("deletes %v, want [file dir]", got)
		}
	})
}

// TestDependencyCycle: keys on a cycle are never attempted; each gets an
// Error wrapping ErrDependencyCycle naming the cycle, and breaking the
// cycle (a change of one key) reconciles them all.
func TestDependencyCycle(t *testing.T) {
	inBubble(t, withDeps, func(f *fixture, ops *timedOps) {
		tg := f.target("")
		insert(t, f, pendingObject("a", "v>b"), pendingObject("b", "v>c"), pendingObject("c", "v>a"), pendingObject("d", "v>a"))
		synctest.Wait()
		if h := tg.History(); len(h) != 0 {
			t.Fatalf("keys on a cycle attempted: %v", h)
		}
		for _, k := range []string{"a", "b", "c"} {
			st := tableStatus(f, k)
			if st.Kind != reconciler.StatusKindError || !strings.Contains(st.Error, "dependency cycle: ") ||
				!strings.Contains(st.Error, "a") || !strings.Contains(st.Error, "b") || !strings.Contains(st.Error, "c") {
				t.Fatalf("%s: %v %q, want an Error naming the cycle", k, st.Kind, st.Error)
			}
			if e := explainKey(t, f, k); e.State != reconciler.KeyGivenUp {
				t.Fatalf("Explain %s: %s %q", k, e.State, e.Reason)
			}
		}
		if e := explainKey(t, f, "d"); e.State != reconciler.KeyBlocked || !strings.HasPrefix(e.Reason, "blocked on a: Error: ") {
			t.Fatalf("Explain d: %s %q", e.State, e.Reason)
		}
		r, _ := f.reconciler("")
		if s := r.Status(); s.Objects.Error != 3 {
			t.Fatalf("Status errors %d, want 3", s.Objects.Error)
		}
		insert(t, f, pendingObject("c", "v")) // c no longer depends on a
		synctest.Wait()
		for _, k := range []string{"a", "b", "c", "d"} {
			if st := tableStatus(f, k); st.Kind != reconciler.StatusKindDone {
				t.Fatalf("%s is %s %q after the cycle was broken", k, st.Kind, st.Error)
			}
		}
		if h := tg.History(); !slices.Equal(h, []string{"update(c)", "update(b)", "update(a)", "update(d)"}) {
			t.Fatalf("history %v, want c, b, a, d", h)
		}
	})
}

// TestDependencyChangeDoesNotRerun: a dependency only gates: a change of
// its object does not run its dependents again.
func TestDependencyChangeDoesNotRerun(t *testing.T) {
	inBubble(t, withDeps, func(f *fixture, ops *timedOps) {
		tg := f.target("")
		insert(t, f, pendingObject("dir", "d"), pendingObject("file", "v>dir"))
		synctest.Wait()
		tg.ClearHistory()
		insert(t, f, pendingObject("dir", "d2"))
		synctest.Wait()
		if h := tg.History(); !slices.Equal(h, []string{"update(dir)"}) {
			t.Fatalf("history %v, want only the dependency's update", h)
		}
	})
}

// TestBlockedHoldsWaits: a Blocked change is not reconciled: the waits
// do not return for it, and their error says what it waits for.
func TestBlockedHoldsWaits(t *testing.T) {
	inBubble(t, withDeps, func(f *fixture, ops *timedOps) {
		wtxn := f.db.WriteTxn(f.table)
		f.table.Insert(wtxn, pendingObject("file", "v>dir"))
		rev := f.table.Revision(wtxn)
		wtxn.Commit()
		r, _ := f.reconciler("")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, _, err := r.WaitUntilReconciled(ctx, rev); err == nil || !strings.Contains(err.Error(), "blocked on dir: not in the table") {
			t.Fatalf("WaitUntilReconciled: %v", err)
		}
		insert(t, f, pendingObject("dir", "d"))
		ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
		defer cancel2()
		if err := r.WaitUntilSettled(ctx2, rev); err != nil {
			t.Fatal(err)
		}
	})
}
