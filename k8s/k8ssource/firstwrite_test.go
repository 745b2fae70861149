package k8ssource_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/converge-go/converge/k8s/k8ssource"
)

// kstatus reads a new object without status as Current: the writer's
// first Reconciling condition must not wait for anything but its
// request. With writes paced to one an hour, and the target's Update
// held, a new object still gets Reconciling (kstatus InProgress, for its
// generation), and its outcome once the Update is let go: neither took
// a token nor waited for the reconciler.
func TestFirstReconcilingWriteImmediate(t *testing.T) {
	c := newCRD(t, cached)
	tg := newTarget()
	startAgent(t, c, tg, agentOpts{status: func(s *k8ssource.StatusConfig[*unstructured.Unstructured, *obj]) {
		kstatusConfig(s)
		s.MinInterval, s.Burst = time.Hour, 1
	}})
	// A first object makes the writer check the resource and spend its
	// first write.
	c.create(t, "ns", "warm", "v")
	c.waitConditionType(t, "ns", "warm", "Ready", "True", k8ssource.ReasonReconciled)

	release := tg.hold("ns/new")
	defer release()
	c.create(t, "ns", "new", "v")
	u := c.waitObject(t, "ns", "new", func(u *unstructured.Unstructured) bool {
		cond, ok := conditionOfType(u, "Ready")
		return ok && cond.Reason == k8ssource.ReasonReconciling
	})
	if res, err := status.Compute(u); err != nil || res.Status != status.InProgressStatus {
		t.Fatalf("kstatus of the new object: %v, %v", res, err)
	}
	if cond, _ := conditionOfType(u, "Ready"); cond.ObservedGeneration != u.GetGeneration() {
		t.Fatalf("Reconciling for generation %d of %d", cond.ObservedGeneration, u.GetGeneration())
	}
	release()
	c.waitConditionType(t, "ns", "new", "Ready", "True", k8ssource.ReasonReconciled)
}
