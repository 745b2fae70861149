package metrics_test

import (
	"encoding/json"
	"expvar"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/converge-go/converge/metrics"
	"github.com/converge-go/converge/reconciler"
)

// expvarTree decodes an ExpVar's JSON.
func expvarTree(t *testing.T, v expvar.Var) map[string]any {
	t.Helper()
	var tree map[string]any
	if err := json.Unmarshal([]byte(v.String()), &tree); err != nil {
		t.Fatalf("expvar JSON: %s\n%s", err, v.String())
	}
	return tree
}

// lookup follows path through nested maps.
func lookup(tree map[string]any, path ...string) (any, bool) {
	var v any = tree
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[p]; !ok {
			return nil, false
		}
	}
	return v, true
}

// TestExpVarTwice checks that NewExpVar can be called more than once in a
// process, and that both publish into the one process-wide map.
func TestExpVarTwice(t *testing.T) {
	a, b := metrics.NewExpVar(), metrics.NewExpVar()
	a.Reconciler(reconciler.ReconcilerID{ModuleID: "twice-a", Name: "x"}).RetryScheduled()
	b.Reconciler(reconciler.ReconcilerID{ModuleID: "twice-b"}).RetryScheduled()
	b.Reconciler(reconciler.ReconcilerID{ModuleID: "twice-b"}).RetryScheduled() // the same variables

	pub := expvar.Get(metrics.ExpVarName)
	if pub == nil {
		t.Fatalf("%s is not published", metrics.ExpVarName)
	}
	tree := expvarTree(t, pub)
	for key, want := range map[string]float64{"twice-a/x": 1, "twice-b": 2} {
		if v, _ := lookup(tree, key, "retries_scheduled_total"); v != want {
			t.Errorf("%s retries_scheduled_total = %v, want %v", key, v, want)
		}
	}
	// Each ExpVar shows only its own reconcilers.
	if _, ok := expvarTree(t, a)["twice-b"]; ok {
		t.Error("a shows b's reconciler")
	}
}

func TestExpVarUnpublished(t *testing.T) {
	e := metrics.NewUnpublishedExpVar()
	e.Reconciler(reconciler.ReconcilerID{ModuleID: "unpublished"})
	if tree := expvarTree(t, expvar.Get(metrics.ExpVarName)); tree["unpublished"] != nil {
		t.Error("NewUnpublishedExpVar published a reconciler")
	}
}

// TestExpVarSameInformation feeds the same calls to Prometheus and ExpVar
// and checks that every Prometheus sample has its equal in expvar.
func TestExpVarSameInformation(t *testing.T) {
	reg, p := newPrometheus(t)
	e := metrics.NewUnpublishedExpVar()
	ids := []reconciler.ReconcilerID{testID, {ModuleID: "mod"}}
	for _, id := range ids {
		exercise(p.Reconciler(id))
		exercise(e.Reconciler(id))
	}
	// Make the two differ from the all-zero case a little more.
	p.Reconciler(testID).Operation(reconciler.OpPrune, reconciler.ResultPanic, 100, time.Second)
	e.Reconciler(testID).Operation(reconciler.OpPrune, reconciler.ResultPanic, 100, time.Second)

	tree := expvarTree(t, e)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	compare := func(path []string, want float64) {
		t.Helper()
		v, ok := lookup(tree, path...)
		got, isNum := v.(float64)
		if !ok || !isNum {
			t.Errorf("expvar %s: missing (%v)", strings.Join(path, "."), v)
			return
		}
		// The oldest-waiting age is read at slightly different times.
		tolerance := 1e-9
		if strings.HasSuffix(path[1], "oldest_waiting_seconds") {
			tolerance = 1
		}
		if math.Abs(got-want) > tolerance {
			t.Errorf("expvar %s = %v, Prometheus says %v", strings.Join(path, "."), got, want)
		}
	}
	samples := 0
	for _, mf := range families {
		short := strings.TrimPrefix(mf.GetName(), metrics.Prefix)
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			id := reconciler.ReconcilerID{ModuleID: labels[metrics.LabelModuleID], Name: labels[metrics.LabelName]}
			path := []string{id.DisplayName(), short}
			for _, l := range []string{metrics.LabelOp, metrics.LabelResult, metrics.LabelPriority} {
				if v, ok := labels[l]; ok {
					path = append(path, v)
				}
			}
			switch {
			case m.GetCounter() != nil:
				compare(path, m.GetCounter().GetValue())
			case m.GetGauge() != nil:
				compare(path, m.GetGauge().GetValue())
			case m.GetHistogram() != nil:
				compare(append(path, "count"), float64(m.GetHistogram().GetSampleCount()))
				compare(append(path, "sum"), m.GetHistogram().GetSampleSum())
			}
			samples++
		}
	}
	if samples == 0 {
		t.Fatal("no samples compared")
	}
}

func TestExpVarOldestWaitingAges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := metrics.NewUnpublishedExpVar()
		m := e.Reconciler(testID)
		age := func() any { v, _ := lookup(expvarTree(t, e), "mod/routes", "oldest_waiting_seconds"); return v }
		m.Gauges(reconciler.Gauges{Waiting: 1, OldestWaiting: 2 * time.Second})
		time.Sleep(3 * time.Second)
		if v := age(); v != 5.0 {
			t.Errorf("3s after the report: %v, want 5", v)
		}
		m.Gauges(reconciler.Gauges{})
		if v := age(); v != 0.0 {
			t.Errorf("nothing waiting: %v, want 0", v)
		}
	})
}

func TestExpVarNoAllocs(t *testing.T) {
	testNoAllocs(t, metrics.NewUnpublishedExpVar().Reconciler(testID))
}

func BenchmarkExpVarOperation(b *testing.B) {
	m := metrics.NewUnpublishedExpVar().Reconciler(testID)
	b.ReportAllocs()
	for b.Loop() {
		m.Operation(reconciler.OpUpdate, reconciler.ResultOK, 1, 150*time.Microsecond)
	}
}
