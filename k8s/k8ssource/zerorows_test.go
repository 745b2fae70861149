package k8ssource_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An object that yields no table objects gets a condition (True: nothing
// to do), and so does one edited from N objects to none, for its new
// generation, once their rows are gone; the target loses them. kubectl
// wait returns in both.
func TestZeroRowsCondition(t *testing.T) {
	c := newCRD(t, cached)
	a := startAgent(t, c, newTarget(), agentOpts{statusInterval: 1})
	c.create(t, "ns", "empty", "none")
	c.waitCondition(t, "ns", "empty", metav1.ConditionTrue, "Reconciled")

	c.create(t, "ns", "shrinks", "rows:3")
	a.waitDone(map[string]string{"ns/shrinks#0": "rows:3", "ns/shrinks#1": "rows:3", "ns/shrinks#2": "rows:3"})
	c.waitCondition(t, "ns", "shrinks", metav1.ConditionTrue, "Reconciled")
	if got := a.settle(); len(got) != 3 {
		t.Fatalf("target %v", got)
	}

	c.setValue(t, "ns", "shrinks", "none")
	cond := c.waitCondition(t, "ns", "shrinks", metav1.ConditionTrue, "Reconciled")
	if cond.ObservedGeneration != 2 {
		t.Fatalf("condition %+v", cond)
	}
	a.waitDone(map[string]string{})
	if got := a.settle(); len(got) != 0 {
		t.Fatalf("target %v", got)
	}

	// And from none to some: reconciled, for generation 3.
	c.setValue(t, "ns", "shrinks", "rows:2")
	a.waitDone(map[string]string{"ns/shrinks#0": "rows:2", "ns/shrinks#1": "rows:2"})
	if cond := c.waitCondition(t, "ns", "shrinks", metav1.ConditionTrue, "Reconciled"); cond.ObservedGeneration != 3 {
		t.Fatalf("condition %+v", cond)
	}
}
