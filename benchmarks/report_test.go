package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestPairsMet checks that a goal is judged pair by pair, for a plain row
// and a derived one, and that a variant with fewer runs limits the pairs.
func TestPairsMet(t *testing.T) {
	le := &goal{desc: "<=statedb", met: func(o, t float64) bool { return o <= t }}
	results := map[string][]measure{
		"c": {{"p99": 1}, {"p99": 3}, {"p99": 2}},
		"s": {{"p99": 2}, {"p99": 2}, {"p99": 2}},
		"x": {{"p99": 1}, {"p99": 1}},
	}
	for _, c := range []struct {
		spec      rowSpec
		met, pair int
	}{
		{rowSpec{ours: "c", theirs: "s", metric: "p99", goal: le}, 2, 3},
		{rowSpec{ours: "c", theirs: "x", metric: "p99", goal: le}, 1, 2},
		{rowSpec{goal: le, derive: func(at func(string, string) float64) (float64, float64) {
			return at("c", "p99") / at("s", "p99"), 1
		}}, 2, 3},
	} {
		met, pairs := pairsMet(c.spec, results)
		if met != c.met || pairs != c.pair {
			t.Errorf("%s vs %s: %d/%d pairs met, want %d/%d", c.spec.ours, c.spec.theirs, met, pairs, c.met, c.pair)
		}
	}
}

// TestJSONGoal checks that a row with a goal carries it, its verdict and
// the pairs that met it in JSON, and a row without one carries none.
func TestJSONGoal(t *testing.T) {
	le := &goal{desc: "<=statedb", met: func(o, t float64) bool { return o <= t }}
	var b strings.Builder
	err := writeJSON(&b, []row{
		{Workload: "latency/trickle-500/1k/p99", Converge: 1, Statedb: 2, Unit: unitMillis, Ratio: 2, Runs: 3, PairsMet: 2, Pairs: 3, goal: le, met: true},
		{Workload: "noop-1m/cpu", Converge: 1, Statedb: 2, Unit: unitCPUMicrosPerObject, Ratio: 2, Runs: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	var withGoal, without map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &withGoal); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &without); err != nil {
		t.Fatal(err)
	}
	if withGoal["goal"] != "<=statedb" || withGoal["met"] != true || withGoal["pairs_met"] != 2.0 || withGoal["pairs"] != 3.0 {
		t.Errorf("row with a goal: %s", lines[0])
	}
	if _, ok := without["goal"]; ok {
		t.Errorf("row without a goal: %s", lines[1])
	}
}

// TestGoalFloor: a goal with a floor is met by its ratio, or at or below
// the floor derived from the same runs, and missed above both.
func TestGoalFloor(t *testing.T) {
	g := &goal{desc: "<=0.90x statedb or the table floor", met: func(o, t float64) bool { return o <= 0.9*t },
		floor: func(med func(string, string) float64) float64 { return med("limit", metricBytes) }}
	for _, c := range []struct {
		ours, theirs, floor float64
		want                bool
	}{
		{85, 100, 50, true},  // by the ratio
		{96, 100, 96, true},  // at the floor
		{95, 100, 96, true},  // below the floor
		{97, 100, 96, false}, // above both
	} {
		med := func(name, metric string) float64 {
			if name != "limit" || metric != metricBytes {
				t.Fatalf("floor asked for %s %s", name, metric)
			}
			return c.floor
		}
		if got := g.holds(c.ours, c.theirs, med); got != c.want {
			t.Errorf("holds(%v, %v) with the floor at %v = %v, want %v", c.ours, c.theirs, c.floor, got, c.want)
		}
	}
}
