package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-go/converge/metrics"
	"github.com/converge-go/converge/reconciler"
)

// TestObserverCounters: both implementations record what observers lost,
// as ObserverMetrics, in the series METRICS.md names.
func TestObserverCounters(t *testing.T) {
	id := reconciler.ReconcilerID{ModuleID: "app", Name: "obs"}
	reg := prometheus.NewRegistry()
	p, err := metrics.NewPrometheus(reg)
	if err != nil {
		t.Fatal(err)
	}
	e := metrics.NewUnpublishedExpVar()
	for _, m := range []reconciler.Metrics{p, e} {
		om, ok := m.Reconciler(id).(reconciler.ObserverMetrics)
		if !ok {
			t.Fatalf("%T's reconciler metrics are not ObserverMetrics", m)
		}
		om.ObserverDropped(3)
		om.ObserverDropped(2)
		om.ObserverPanicked()
	}
	for name, want := range map[string]float64{
		"converge_reconciler_observer_events_dropped_total": 5,
		"converge_reconciler_observer_panics_total":         1,
	} {
		if got := counterValue(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	tree := expvarTree(t, e)
	for path, want := range map[string]float64{"observer_events_dropped_total": 5, "observer_panics_total": 1} {
		if v, ok := lookup(tree, "app/obs", path); !ok || v.(float64) != want {
			t.Errorf("expvar %s = %v, want %v", path, v, want)
		}
	}
}

// counterValue gathers name's single series from reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) == 1 {
			return mf.Metric[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("%s: no single series", name)
	return 0
}
