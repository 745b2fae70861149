package main

import (
	"iter"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// TestSyncStorm runs sync-storm once per variant at tiny sizes and checks
// its rows: every one is there, each side rendered during the storm (no
// change can be Done without a render), the percentiles are ordered and
// the p99 bound holds at least the maximum wait. No timing is asserted.
func TestSyncStorm(t *testing.T) {
	o := options{sizes: tinySizes(), pairs: 1, only: regexp.MustCompile("^sync-storm$")}
	var log strings.Builder
	rows, err := runSuite(o, &log)
	t.Log("\n" + log.String())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]row{}
	for _, r := range rows {
		byName[r.Workload] = r
	}
	for _, name := range []string{"syncs", "p50", "p99", "p99-bound", "cpu", "reconciler-cpu"} {
		if _, ok := byName["sync-storm/"+name]; !ok {
			t.Errorf("no row sync-storm/%s", name)
		}
	}
	syncs := byName["sync-storm/syncs"]
	if syncs.Converge < 1 || syncs.Statedb < 1 {
		t.Errorf("renders during the storm: converge %v, statedb %v; want at least one each", syncs.Converge, syncs.Statedb)
	}
	if syncs.goal == nil || syncs.Pairs != 1 {
		t.Errorf("sync-storm/syncs: goal %v judged on %d pairs, want a goal judged on 1", syncs.goal, syncs.Pairs)
	}
	p50, p99 := byName["sync-storm/p50"], byName["sync-storm/p99"]
	if p50.Converge > p99.Converge || p50.Statedb > p99.Statedb {
		t.Errorf("p50 above p99: converge %v > %v or statedb %v > %v", p50.Converge, p99.Converge, p50.Statedb, p99.Statedb)
	}
	bound := byName["sync-storm/p99-bound"]
	if maxWait := millis(reconciler.DefaultSyncMaxWait); bound.Statedb < maxWait || bound.Converge != p99.Converge {
		t.Errorf("sync-storm/p99-bound: %v against %v, want converge's p99 %v against at least %v", bound.Converge, bound.Statedb, p99.Converge, maxWait)
	}
	if r := byName["sync-storm/reconciler-cpu"]; r.goal == nil || r.Converge < 0 || r.Statedb < 0 {
		t.Errorf("sync-storm/reconciler-cpu: %v and %v, goal %v; want a goal and no negative CPU", r.Converge, r.Statedb, r.goal)
	}
	cpu := byName["sync-storm/cpu"]
	if !(cpu.Converge > 0) || !(cpu.Statedb > 0) {
		t.Errorf("sync-storm/cpu: converge %v, statedb %v; want both above zero", cpu.Converge, cpu.Statedb)
	}
}

// TestRenderSameForBothSides checks that the two sides' objects render to
// the same text when their keys and values are equal, and that a changed
// value changes the digest.
func TestRenderSameForBothSides(t *testing.T) {
	const n = 100
	ours := make([]*convergeObject, n)
	theirs := make([]*statedbObject, n)
	for i := range n {
		ours[i] = &convergeObject{ID: uint64(i), Value: uint64(i * 7), Status: reconciler.StatusPending()}
		theirs[i] = &statedbObject{ID: uint64(i), Value: uint64(i * 7)}
	}
	rt := newRenderTarget()
	a := render(rt, withRevisions(ours), (*convergeObject).fields)
	b := render(rt, withRevisions(theirs), (*statedbObject).fields)
	if a != b {
		t.Errorf("the same objects render differently: %x and %x", a, b)
	}
	theirs[n/2] = &statedbObject{ID: n / 2, Value: math.MaxUint64}
	if c := render(rt, withRevisions(theirs), (*statedbObject).fields); c == a {
		t.Error("a changed value did not change the digest")
	}
	st := rt.stats()
	if st.renders != 3 || st.objects != n {
		t.Errorf("%d renders of %d objects, want 3 of %d", st.renders, st.objects, n)
	}
	select {
	case <-rt.first:
	default:
		t.Error("first not closed after a render")
	}
}

// withRevisions yields objs as a table would, each with a revision.
func withRevisions[Obj any](objs []Obj) iter.Seq2[Obj, statedb.Revision] {
	return func(yield func(Obj, statedb.Revision) bool) {
		for i, o := range objs {
			if !yield(o, statedb.Revision(i+1)) {
				return
			}
		}
	}
}
