package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/metrics"
	"github.com/converge-go/converge/reconciler"
)

// The scripted scenario: n inserts of which k fail once and then heal, d
// deletes, one prune.
const (
	scenarioInserts  = 10
	scenarioFailures = 3
	scenarioDeletes  = 4
)

// opResult is one (op, result) label pair.
type opResult struct {
	op     reconciler.Op
	result reconciler.Result
}

// scenarioExpect is what the scenario must have recorded.
type scenarioExpect struct {
	operations map[opResult]int // operations_total; absent pairs are 0
	objects    map[opResult]int // operation_objects_total
	durations  map[reconciler.Op]int
	rounds     int // round_objects_total
	retries    int
	fulls      int
	realized   int // realization_duration_seconds observations
}

var expected = scenarioExpect{
	operations: map[opResult]int{
		{reconciler.OpUpdate, reconciler.ResultOK}:    scenarioInserts,
		{reconciler.OpUpdate, reconciler.ResultError}: scenarioFailures,
		{reconciler.OpDelete, reconciler.ResultOK}:    scenarioDeletes,
		{reconciler.OpPrune, reconciler.ResultOK}:     1,
	},
	objects: map[opResult]int{
		{reconciler.OpUpdate, reconciler.ResultOK}:    scenarioInserts,
		{reconciler.OpUpdate, reconciler.ResultError}: scenarioFailures,
		{reconciler.OpDelete, reconciler.ResultOK}:    scenarioDeletes,
		// Prune is given every desired object.
		{reconciler.OpPrune, reconciler.ResultOK}: scenarioInserts - scenarioDeletes,
	},
	durations: map[reconciler.Op]int{
		reconciler.OpUpdate: scenarioInserts + scenarioFailures,
		reconciler.OpDelete: scenarioDeletes,
		reconciler.OpPrune:  1,
	},
	// Every operation's result is committed by a round, failures too.
	rounds:  scenarioInserts + scenarioFailures + scenarioDeletes,
	retries: scenarioFailures,
	fulls:   1,
	// Every insert is realized once, those that failed first included;
	// deletes are not.
	realized: scenarioInserts,
}

// runScenario runs the scenario against a real reconciler that reports to
// m, and returns once everything it did is recorded.
func runScenario(t *testing.T, m reconciler.Metrics) {
	n := newNotifying(m)
	f := newFixture(t, "scenario", n)
	f.start()

	ids := keys(scenarioInserts)
	for _, id := range ids[:scenarioFailures] {
		f.target.SetFault(id, fake.Fault{Mode: fake.ModeError, Count: 1})
	}
	rev := f.insert(ids...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := reconciler.WaitForReconciliation(ctx, f.db, f.table.ToTable(), statusIndex); err != nil {
		t.Fatalf("WaitForReconciliation: %s", err)
	}
	n.waitFor(t, "the inserts to settle", n.settled(f.rec, rev))

	rev = f.delete(ids[scenarioInserts-scenarioDeletes:]...)
	n.waitFor(t, "the deletes to settle", n.settled(f.rec, rev))

	f.rec.TriggerFullReconciliation()
	n.waitFor(t, "the full reconciliation", n.fullDone(1))

	if got, want := len(f.target.State()), scenarioInserts-scenarioDeletes; got != want {
		t.Fatalf("target holds %d objects, want %d", got, want)
	}
}

func TestPrometheusScenario(t *testing.T) {
	reg := prometheus.NewRegistry()
	p, err := metrics.NewPrometheus(reg)
	if err != nil {
		t.Fatal(err)
	}
	runScenario(t, p)

	id := reconciler.ReconcilerID{ModuleID: "test", Name: "scenario"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expectedExposition(id, expected)),
		prefix+"operations_total", prefix+"operation_objects_total", prefix+"round_objects_total",
		prefix+"retries_scheduled_total", prefix+"full_reconciliation_failing",
		prefix+"failing_objects", prefix+"waiting_objects", prefix+"in_flight_operations",
		prefix+"queued_retries", prefix+"oldest_waiting_seconds",
	); err != nil {
		t.Fatal(err)
	}

	// Histograms: the count of observations is exact, the rest is timing.
	hists := histogramCounts(t, reg)
	for _, op := range reconciler.Ops {
		key := fmt.Sprintf("%soperation_duration_seconds{module_id=test,name=scenario,op=%s}", prefix, op)
		if got, want := hists[key], expected.durations[op]; got != want {
			t.Errorf("%s: count %d, want %d", key, got, want)
		}
	}
	if got := hists[prefix+"full_reconciliation_duration_seconds{module_id=test,name=scenario}"]; got != expected.fulls {
		t.Errorf("full reconciliations: %d, want %d", got, expected.fulls)
	}
	if got := hists[prefix+"realization_duration_seconds{module_id=test,name=scenario}"]; got != expected.realized {
		t.Errorf("realizations: %d, want %d", got, expected.realized)
	}
	if got := hists[prefix+"round_duration_seconds{module_id=test,name=scenario}"]; got < 1 || got > expected.rounds {
		t.Errorf("rounds: %d, want between 1 and %d", got, expected.rounds)
	}

	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestExpVarScenario(t *testing.T) {
	e := metrics.NewUnpublishedExpVar()
	runScenario(t, e)

	var all map[string]map[string]any
	if err := json.Unmarshal([]byte(e.String()), &all); err != nil {
		t.Fatalf("expvar JSON: %s\n%s", err, e.String())
	}
	vars, ok := all["test/scenario"]
	if !ok {
		t.Fatalf("no test/scenario in %s", e.String())
	}
	get := func(path ...string) float64 {
		t.Helper()
		var v any = vars
		for _, p := range path {
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%v: not a map at %q", path, p)
			}
			v = m[p]
		}
		f, ok := v.(float64)
		if !ok {
			t.Fatalf("%v: %v is not a number", path, v)
		}
		return f
	}
	check := func(want int, path ...string) {
		t.Helper()
		if got := get(path...); got != float64(want) {
			t.Errorf("%s: %v, want %d", strings.Join(path, "."), got, want)
		}
	}
	for _, op := range reconciler.Ops {
		for _, res := range reconciler.Results {
			check(expected.operations[opResult{op, res}], "operations_total", string(op), string(res))
			check(expected.objects[opResult{op, res}], "operation_objects_total", string(op), string(res))
		}
		check(expected.durations[op], "operation_duration_seconds", string(op), "count")
	}
	check(expected.rounds, "round_objects_total")
	check(expected.retries, "retries_scheduled_total")
	check(expected.fulls, "full_reconciliation_duration_seconds", "count")
	check(expected.realized, "realization_duration_seconds", "count")
	for _, gauge := range []string{"full_reconciliation_failing", "failing_objects", "waiting_objects",
		"in_flight_operations", "queued_retries", "oldest_waiting_seconds"} {
		check(0, gauge)
	}
	if rounds := get("round_duration_seconds", "count"); rounds < 1 || rounds > float64(expected.rounds) {
		t.Errorf("rounds: %v, want between 1 and %d", rounds, expected.rounds)
	}
}

const prefix = metrics.Prefix

// expectedExposition renders the scenario's counters and gauges in the
// text format, every label combination included: the ones that never
// happened must be there at zero.
func expectedExposition(id reconciler.ReconcilerID, want scenarioExpect) string {
	var b strings.Builder
	help := map[string]string{}
	for _, d := range metrics.Definitions() {
		help[d.Name] = d.Help
	}
	header := func(name, kind string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, help[name], name, kind)
	}
	labels := fmt.Sprintf(`module_id=%q,name=%q`, id.ModuleID, id.Name)
	for _, family := range []struct {
		name   string
		values map[opResult]int
	}{
		{prefix + "operations_total", want.operations},
		{prefix + "operation_objects_total", want.objects},
	} {
		header(family.name, "counter")
		for _, op := range reconciler.Ops {
			for _, res := range reconciler.Results {
				fmt.Fprintf(&b, "%s{%s,op=%q,result=%q} %d\n", family.name, labels, op, res, family.values[opResult{op, res}])
			}
		}
	}
	single := func(name, kind string, v int) {
		header(name, kind)
		fmt.Fprintf(&b, "%s{%s} %d\n", name, labels, v)
	}
	single(prefix+"round_objects_total", "counter", want.rounds)
	single(prefix+"retries_scheduled_total", "counter", want.retries)
	for _, g := range []string{"full_reconciliation_failing", "failing_objects", "waiting_objects",
		"in_flight_operations", "queued_retries", "oldest_waiting_seconds"} {
		single(prefix+g, "gauge", 0)
	}
	return b.String()
}

// histogramCounts returns the sample count of every histogram series of
// reg, keyed by name{label=value,...}.
func histogramCounts(t *testing.T, reg prometheus.Gatherer) map[string]int {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			if m.GetHistogram() == nil {
				continue
			}
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = int(m.GetHistogram().GetSampleCount())
		}
	}
	return out
}
