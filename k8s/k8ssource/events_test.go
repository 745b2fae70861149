package k8ssource_test

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-go/converge/k8s/k8ssource"
)

// The status writer records Events (Normal Reconciled, Warning
// ReconcileFailed and TransformFailed) on the objects, and its writes and
// client-go's requests reach a Prometheus registry.
func TestEventsAndMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := cached.InstallEvents(ctx); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cached.Config())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	prom, err := k8ssource.NewPrometheus(reg)
	if err != nil {
		t.Fatal(err)
	}
	c := newCRD(t, cached)
	ns := c.gvr.Resource // a namespace of its own: Events outlive the test
	tg := newTarget()
	tg.setFail(ns+"/broken", errors.New("disk full"))
	startAgent(t, c, tg, agentOpts{statusInterval: 1, status: func(s *k8ssource.StatusConfig[*unstructured.Unstructured, *obj]) {
		s.Events, s.Metrics, s.FieldManager = cs.EventsV1(), prom, "events-test"
	}})
	c.create(t, ns, "fine", "v")
	c.create(t, ns, "broken", "v")
	c.create(t, ns, "invalid", "bad-spec")
	want := map[string]string{"fine": "Normal/Reconciled", "broken": "Warning/ReconcileFailed", "invalid": "Warning/TransformFailed"}
	got := waitEvents(t, cs, ns, len(want))
	for name, w := range want {
		e := got[name]
		if e == nil || e.Type+"/"+e.Reason != w || e.ReportingController != "events-test" || e.Regarding.Kind != c.kind || e.Regarding.UID == "" {
			t.Fatalf("event of %s: %+v, want %s", name, e, w)
		}
	}
	if n := counter(t, reg, "converge_k8s_status_writes_total", map[string]string{"outcome": "written", "name": "k8s"}); n < 3 {
		t.Fatalf("%v status writes counted", n)
	}
	if n := counter(t, clientMetrics, "converge_k8s_rest_client_requests_total", map[string]string{"code": "200", "method": "PATCH"}); n < 3 {
		t.Fatalf("%v successful PATCH requests counted", n)
	}
}

// waitEvents watches the Events of namespace ns until n objects have
// one, and returns the first of each object.
func waitEvents(t *testing.T, cs kubernetes.Interface, ns string, n int) map[string]*eventsv1.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	w, err := cs.EventsV1().Events(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.Everything().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	got := map[string]*eventsv1.Event{}
	for ev := range w.ResultChan() {
		if e, ok := ev.Object.(*eventsv1.Event); ok && got[e.Regarding.Name] == nil {
			got[e.Regarding.Name] = e
		}
		if len(got) >= n {
			return got
		}
	}
	t.Fatalf("events of %d objects, want %d: %v", len(got), n, got)
	return nil
}

// waitEvent watches the Events of namespace ns until one of reason
// regards the object name, and returns it.
func waitEvent(t *testing.T, cs kubernetes.Interface, ns, name, reason string) *eventsv1.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	w, err := cs.EventsV1().Events(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if e, ok := ev.Object.(*eventsv1.Event); ok && e.Regarding.Name == name && e.Reason == reason {
			return e
		}
	}
	t.Fatalf("no %s event of %s/%s", reason, ns, name)
	return nil
}

// counter sums the series of the counter name whose labels include
// labels.
func counter(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := want[lp.GetName()]; ok && v == lp.GetValue() {
			n++
		}
	}
	return n == len(want)
}
