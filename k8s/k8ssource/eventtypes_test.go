package k8ssource_test

import (
	"context"
	"errors"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/converge-go/converge/k8s/k8ssource"
)

// EventsWarnings records the failures' Warnings and no Normal
// Reconciled; EventsNone records nothing. The Events go to a fake
// clientset, which keeps each in order: client-go's broadcaster sends
// them one after the other.
func TestEventTypes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		types k8ssource.EventTypes
	}{{"warnings", k8ssource.EventsWarnings}, {"none", k8ssource.EventsNone}} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			defer cancel()
			events, err := cs.EventsV1().Events("ns").Watch(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer events.Stop()
			c := newCRD(t, cached)
			tg := newTarget()
			tg.setFail("ns/broken", errors.New("disk full"))
			startAgent(t, c, tg, agentOpts{statusInterval: 1, status: func(s *k8ssource.StatusConfig[*unstructured.Unstructured, *obj]) {
				s.Events, s.EventTypes = cs.EventsV1(), tc.types
			}})
			c.create(t, "ns", "fine", "v")
			c.waitCondition(t, "ns", "fine", metav1.ConditionTrue, k8ssource.ReasonReconciled)
			c.create(t, "ns", "broken", "v")
			c.waitCondition(t, "ns", "broken", metav1.ConditionFalse, k8ssource.ReasonReconcileFailed)
			if tc.types == k8ssource.EventsNone {
				if acts := cs.Actions(); len(acts) > 1 { // the test's own watch
					t.Fatalf("EventsNone: %d requests to the Events API: %v", len(acts)-1, acts[1:])
				}
				return
			}
			// The first Event recorded is broken's Warning: fine's
			// Normal, had it been recorded, would have come first.
			for ev := range events.ResultChan() {
				if ev.Type != watch.Added {
					continue
				}
				e := ev.Object.(*eventsv1.Event)
				if e.Regarding.Name != "broken" || e.Type != "Warning" || e.Reason != k8ssource.ReasonReconcileFailed {
					t.Fatalf("first Event %s %s of %s", e.Type, e.Reason, e.Regarding.Name)
				}
				return
			}
			t.Fatal("no Event came")
		})
	}
}
