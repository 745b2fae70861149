package k8ssource_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cilium/hive/cell"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-go/converge/k8s/k8ssource"
)

// gauge is the value of the gauge name with labels in g.
func gauge(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no gauge %s %v", name, labels)
	return 0
}

// A stuck finalizer shows in the status job's health: Degraded with how
// many objects a failing cleanup holds and the oldest, and in the
// metrics; once the Deletes succeed, health is OK and the count 0.
func TestStuckCleanupInHealth(t *testing.T) {
	reg := prometheus.NewRegistry()
	prom, err := k8ssource.NewPrometheus(reg)
	if err != nil {
		t.Fatal(err)
	}
	c := newCRD(t, cached)
	tg := newTarget()
	a := startAgent(t, c, tg, agentOpts{statusInterval: 1, finalizer: testFinalizer,
		status: func(s *k8ssource.StatusConfig[*unstructured.Unstructured, *obj]) { s.Metrics = prom }})
	labels := map[string]string{"name": "k8s"}
	if n := gauge(t, reg, "converge_k8s_cleanup_stuck_objects", labels); n != 0 {
		t.Fatalf("%v stuck at start", n)
	}
	for _, name := range []string{"old", "new"} {
		c.create(t, "ns", name, "v")
		c.waitCondition(t, "ns", name, metav1.ConditionTrue, k8ssource.ReasonReconciled)
		tg.setDeleteFail("ns/"+name, errors.New("provider down"))
	}
	c.delete(t, "ns", "old")
	c.waitCondition(t, "ns", "old", metav1.ConditionFalse, k8ssource.ReasonCleanupFailed)
	c.delete(t, "ns", "new")
	c.waitCondition(t, "ns", "new", metav1.ConditionFalse, k8ssource.ReasonCleanupFailed)
	a.waitHealth("k8s-status-k8s", func(l cell.Level, _ string, err error) bool {
		return l == cell.StatusDegraded && err != nil &&
			strings.Contains(err.Error(), "2 object(s) held by a failing cleanup") &&
			strings.Contains(err.Error(), "the oldest, ns/old") && strings.Contains(err.Error(), "provider down")
	})
	if n := gauge(t, reg, "converge_k8s_cleanup_stuck_objects", labels); n != 2 {
		t.Fatalf("%v stuck objects counted, want 2", n)
	}
	if ts := gauge(t, reg, "converge_k8s_cleanup_stuck_oldest_timestamp_seconds", labels); ts <= 0 {
		t.Fatalf("oldest %v", ts)
	}

	tg.setDeleteFail("ns/old", nil)
	tg.setDeleteFail("ns/new", nil)
	c.waitGone(t, "ns", "old")
	c.waitGone(t, "ns", "new")
	a.waitHealth("k8s-status-k8s", func(l cell.Level, _ string, _ error) bool { return l == cell.StatusOK })
	if n := gauge(t, reg, "converge_k8s_cleanup_stuck_objects", labels); n != 0 {
		t.Fatalf("%v stuck objects counted after the Deletes succeeded", n)
	}
	if ts := gauge(t, reg, "converge_k8s_cleanup_stuck_oldest_timestamp_seconds", labels); ts != 0 {
		t.Fatalf("oldest %v after the Deletes succeeded", ts)
	}
}
