package k8ssource_test

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/converge-go/converge/k8s/k8ssource"
)

// kstatusConfig is the status writer as kstatus reads it: a Ready
// condition, status.observedGeneration, and Stalled while failing.
func kstatusConfig(s *k8ssource.StatusConfig[*unstructured.Unstructured, *obj]) {
	s.ConditionType, s.ObservedGeneration, s.Stalled = "Ready", true, true
}

// kstatus (cli-utils' kstatus, which kubectl's, Flux's and Argo CD's
// health checks use) reads the objects as InProgress before their table
// objects are Done (a new object, and a new generation), Current once
// they are, and Failed while an operation fails.
func TestKStatus(t *testing.T) {
	c := newCRD(t, cached)
	tg := newTarget()
	startAgent(t, c, tg, agentOpts{status: kstatusConfig})
	kstatus := func(u *unstructured.Unstructured) status.Status {
		t.Helper()
		res, err := status.Compute(u)
		if err != nil {
			t.Fatal(err)
		}
		return res.Status
	}
	waitKStatus := func(name string, want status.Status) *unstructured.Unstructured {
		t.Helper()
		return c.waitObject(t, "ns", name, func(u *unstructured.Unstructured) bool { return kstatus(u) == want })
	}

	release := tg.hold("ns/k")
	c.create(t, "ns", "k", "v1")
	u := waitKStatus("k", status.InProgressStatus)
	if cond, ok := conditionOfType(u, "Ready"); !ok || cond.Reason != k8ssource.ReasonReconciling {
		t.Fatalf("a new object in progress: %+v", cond)
	}
	release()
	u = waitKStatus("k", status.CurrentStatus)
	if g, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); g != 1 {
		t.Fatalf("status.observedGeneration %d", g)
	}

	release = tg.hold("ns/k")
	if s := kstatus(c.setValue(t, "ns", "k", "v2")); s != status.InProgressStatus {
		t.Fatalf("a new generation: %s", s)
	}
	release()
	waitKStatus("k", status.CurrentStatus)

	tg.setFail("ns/k", errors.New("disk full"))
	c.setValue(t, "ns", "k", "v3")
	u = waitKStatus("k", status.FailedStatus)
	if cond, ok := conditionOfType(u, "Stalled"); !ok || cond.Reason != k8ssource.ReasonReconcileFailed {
		t.Fatalf("Stalled %+v", cond)
	}
	tg.setFail("ns/k", nil)
	u = waitKStatus("k", status.CurrentStatus)
	if _, ok := conditionOfType(u, "Stalled"); ok {
		t.Fatal("Stalled stays after the recovery")
	}
	// kubectl wait --for=condition=Ready holds too.
	c.waitConditionType(t, "ns", "k", "Ready", metav1.ConditionTrue, "Reconciled")
}
