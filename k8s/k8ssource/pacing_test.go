package k8ssource_test

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-go/converge/k8s/k8ssource"
)

// A user's apply, wait, apply again is never paced by the per-object
// limiter: the first condition of each new generation is written at
// once. With one write an hour allowed, ten generations in a row each
// get their condition.
func TestNewGenerationNotPaced(t *testing.T) {
	c := newCRD(t, cached)
	startAgent(t, c, newTarget(), agentOpts{status: func(s *k8ssource.StatusConfig[*unstructured.Unstructured, *obj]) {
		s.MinInterval, s.Burst = time.Hour, 1
	}})
	c.create(t, "ns", "p", "v0")
	c.waitCondition(t, "ns", "p", metav1.ConditionTrue, "Reconciled")
	for i := 1; i <= 10; i++ {
		c.setValue(t, "ns", "p", fmt.Sprint("v", i))
		if cond := c.waitCondition(t, "ns", "p", metav1.ConditionTrue, "Reconciled"); cond.ObservedGeneration != int64(i+1) {
			t.Fatalf("apply %d: condition %+v", i, cond)
		}
	}
}
