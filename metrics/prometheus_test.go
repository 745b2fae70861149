package metrics_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/converge-go/converge/metrics"
	"github.com/converge-go/converge/reconciler"
)

var testID = reconciler.ReconcilerID{ModuleID: "mod", Name: "routes"}

func newPrometheus(t testing.TB) (*prometheus.Registry, *metrics.Prometheus) {
	t.Helper()
	reg := prometheus.NewRegistry()
	p, err := metrics.NewPrometheus(reg)
	if err != nil {
		t.Fatalf("NewPrometheus: %s", err)
	}
	return reg, p
}

// exercise makes every kind of call, with every op and result.
func exercise(m reconciler.ReconcilerMetrics) {
	for i, op := range reconciler.Ops {
		for j, res := range reconciler.Results {
			m.Operation(op, res, i+j, time.Duration(i*j)*time.Millisecond)
		}
	}
	m.Round(5, 3*time.Millisecond)
	m.FullReconciliation(time.Second, errors.New("boom"))
	m.RetryScheduled()
	m.Realized([]time.Duration{time.Millisecond, 3 * time.Second, 4 * time.Minute})
	m.Gauges(reconciler.Gauges{Failing: 1, Waiting: 2, InFlight: 3, Retries: 4, OldestWaiting: time.Second})
}

func TestPrometheusLint(t *testing.T) {
	reg, p := newPrometheus(t)
	exercise(p.Reconciler(testID))
	p.Reconciler(reconciler.ReconcilerID{ModuleID: "mod"}) // untouched: all zero
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestPrometheusPreinitialised checks that Reconciler alone creates every
// series, at zero, so that alerts and dashboards see them before the first
// event.
func TestPrometheusPreinitialised(t *testing.T) {
	reg, p := newPrometheus(t)
	p.Reconciler(testID)
	perOp := len(reconciler.Ops)
	perOpResult := perOp * len(reconciler.Results)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, mf := range families {
		got[mf.GetName()] = len(mf.GetMetric())
		for _, m := range mf.GetMetric() {
			var v float64
			switch {
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				v = float64(m.GetHistogram().GetSampleCount())
			}
			if v != 0 {
				t.Errorf("%s %v: %v, want 0", mf.GetName(), m.GetLabel(), v)
			}
		}
	}
	for _, d := range metrics.Definitions() {
		want := 1
		switch {
		case slicesContain(d.Labels, metrics.LabelResult):
			want = perOpResult
		case slicesContain(d.Labels, metrics.LabelOp):
			want = perOp
		}
		if got[d.Name] != want {
			t.Errorf("%s: %d series, want %d", d.Name, got[d.Name], want)
		}
		delete(got, d.Name)
	}
	for name := range got {
		t.Errorf("%s is not in Definitions", name)
	}
}

func slicesContain(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

func TestPrometheusRecords(t *testing.T) {
	reg, p := newPrometheus(t)
	m := p.Reconciler(testID)
	m.Operation(reconciler.OpUpdateBatch, reconciler.ResultError, 7, 2*time.Millisecond)
	m.Operation(reconciler.OpUpdate, reconciler.ResultOK, 1, time.Millisecond)
	m.Operation(reconciler.OpUpdate, reconciler.ResultOK, 1, time.Millisecond)
	m.Operation("no-such-op", reconciler.ResultOK, 1, time.Millisecond) // not recorded
	m.Round(9, time.Millisecond)
	m.RetryScheduled()
	m.RetryScheduled()
	m.FullReconciliation(time.Second, errors.New("prune failed"))
	m.Gauges(reconciler.Gauges{Failing: 1, Waiting: 0, InFlight: 3, Retries: 4})

	expect := `
# HELP converge_reconciler_retries_scheduled_total Times an object was put in the retry queue.
# TYPE converge_reconciler_retries_scheduled_total counter
converge_reconciler_retries_scheduled_total{module_id="mod",name="routes"} 2
# HELP converge_reconciler_round_objects_total Operation results committed to the table by incremental rounds (successes and failures).
# TYPE converge_reconciler_round_objects_total counter
converge_reconciler_round_objects_total{module_id="mod",name="routes"} 9
# HELP converge_reconciler_full_reconciliation_failing 1 when the last full reconciliation's Prune failed, else 0.
# TYPE converge_reconciler_full_reconciliation_failing gauge
converge_reconciler_full_reconciliation_failing{module_id="mod",name="routes"} 1
# HELP converge_reconciler_failing_objects Objects whose last attempt failed (status Error), deletes included.
# TYPE converge_reconciler_failing_objects gauge
converge_reconciler_failing_objects{module_id="mod",name="routes"} 1
# HELP converge_reconciler_in_flight_operations Operation calls running now (a batch counts once).
# TYPE converge_reconciler_in_flight_operations gauge
converge_reconciler_in_flight_operations{module_id="mod",name="routes"} 3
# HELP converge_reconciler_queued_retries Objects in the retry queue.
# TYPE converge_reconciler_queued_retries gauge
converge_reconciler_queued_retries{module_id="mod",name="routes"} 4
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expect),
		prefix+"retries_scheduled_total", prefix+"round_objects_total", prefix+"full_reconciliation_failing",
		prefix+"failing_objects", prefix+"in_flight_operations", prefix+"queued_retries"); err != nil {
		t.Error(err)
	}

	values := sampleValues(t, reg)
	for key, want := range map[string]float64{
		`operations_total{mod,routes,update-batch,error}`:        1,
		`operation_objects_total{mod,routes,update-batch,error}`: 7,
		`operations_total{mod,routes,update,ok}`:                 2,
		`operation_objects_total{mod,routes,update,ok}`:          2,
		`operations_total{mod,routes,update,error}`:              0,
	} {
		if got := values[prefix+key]; got != want {
			t.Errorf("%s = %v, want %v", key, got, want)
		}
	}

	// A successful prune clears the failing gauge.
	m.FullReconciliation(time.Second, nil)
	if v := sampleValues(t, reg)[prefix+"full_reconciliation_failing{mod,routes}"]; v != 0 {
		t.Errorf("full_reconciliation_failing = %v after a success", v)
	}
}

// sampleValues returns every counter and gauge of reg keyed by
// name{labelvalue,...} (label values in label order, without names).
func sampleValues(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			var vals []string
			for _, lp := range m.GetLabel() {
				vals = append(vals, lp.GetValue())
			}
			key := mf.GetName() + "{" + strings.Join(vals, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// TestPrometheusOldestWaitingAges checks that the oldest-waiting gauge
// keeps growing between reports: a hung operation stops the rounds, and
// with them the reports, exactly when the alert on this gauge matters.
func TestPrometheusOldestWaitingAges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg, p := newPrometheus(t)
		m := p.Reconciler(testID)
		key := prefix + "oldest_waiting_seconds{mod,routes}"

		m.Gauges(reconciler.Gauges{Waiting: 1, OldestWaiting: 2 * time.Second})
		if v := sampleValues(t, reg)[key]; v != 2 {
			t.Errorf("at the report: %v, want 2", v)
		}
		time.Sleep(3 * time.Second)
		if v := sampleValues(t, reg)[key]; v != 5 {
			t.Errorf("3s after the report: %v, want 5", v)
		}
		m.Gauges(reconciler.Gauges{})
		if v := sampleValues(t, reg)[key]; v != 0 {
			t.Errorf("nothing waiting: %v, want 0", v)
		}
	})
}

// TestPrometheusTwiceOnOneRegistry checks that a second NewPrometheus on
// the same registry shares the series instead of failing.
func TestPrometheusTwiceOnOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	var ms []reconciler.ReconcilerMetrics
	for range 2 {
		p, err := metrics.NewPrometheus(reg)
		if err != nil {
			t.Fatalf("NewPrometheus: %s", err)
		}
		ms = append(ms, p.Reconciler(testID), p.Reconciler(testID))
		ms[len(ms)-1].Gauges(reconciler.Gauges{Waiting: 1, OldestWaiting: time.Second})
	}
	for _, m := range ms {
		m.RetryScheduled()
	}
	values := sampleValues(t, reg)
	if v := values[prefix+"retries_scheduled_total{mod,routes}"]; v != 4 {
		t.Errorf("retries_scheduled_total = %v, want 4", v)
	}
	if v := values[prefix+"oldest_waiting_seconds{mod,routes}"]; v < 1 {
		t.Errorf("oldest_waiting_seconds = %v, want at least 1", v)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestPrometheusConflict checks that a clash with a foreign metric fails
// and leaves nothing of ours registered.
func TestPrometheusConflict(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: prefix + "round_objects_total", Help: "Not ours."}))
	if _, err := metrics.NewPrometheus(reg); err == nil {
		t.Fatal("NewPrometheus succeeded over a conflicting metric")
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range families {
		names = append(names, mf.GetName())
	}
	if fmt.Sprint(names) != "["+prefix+"round_objects_total]" {
		t.Errorf("left registered: %v", names)
	}
	// The collectors were taken back: a fresh registry works again.
	if _, err := metrics.NewPrometheus(prometheus.NewRegistry()); err != nil {
		t.Error(err)
	}
}

func TestPrometheusNilRegisterer(t *testing.T) {
	if _, err := metrics.NewPrometheus(nil); !errors.Is(err, metrics.ErrNoRegisterer) {
		t.Errorf("NewPrometheus(nil): %v, want ErrNoRegisterer", err)
	}
}

// TestPrometheusNoAllocs holds the hot path to zero allocations.
func TestPrometheusNoAllocs(t *testing.T) {
	_, p := newPrometheus(t)
	m := p.Reconciler(testID)
	testNoAllocs(t, m)
}

func testNoAllocs(t *testing.T, m reconciler.ReconcilerMetrics) {
	t.Helper()
	err := errors.New("boom")
	latencies := []time.Duration{time.Millisecond, 3 * time.Second}
	for name, fn := range map[string]func(){
		"Realized":           func() { m.Realized(latencies) },
		"Operation":          func() { m.Operation(reconciler.OpDeleteBatch, reconciler.ResultExhausted, 3, time.Millisecond) },
		"Round":              func() { m.Round(10, time.Millisecond) },
		"FullReconciliation": func() { m.FullReconciliation(time.Second, err) },
		"RetryScheduled":     func() { m.RetryScheduled() },
		"Gauges":             func() { m.Gauges(reconciler.Gauges{Failing: 1, Waiting: 1, OldestWaiting: time.Second}) },
	} {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}

func BenchmarkPrometheusOperation(b *testing.B) {
	_, p := newPrometheus(b)
	m := p.Reconciler(testID)
	b.ReportAllocs()
	for b.Loop() {
		m.Operation(reconciler.OpUpdate, reconciler.ResultOK, 1, 150*time.Microsecond)
	}
}
