package k8ssource_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Objects created, changed and deleted through the API server reach the
// table and the target, and each one's Reconciled condition follows its
// generation.
func TestCreateUpdateDelete(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts agentOpts
	}{
		{"streaming list", agentOpts{}},
		{"paged list", agentOpts{disableWatchList: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCRD(t, cached)
			var streaming, paged atomic.Int64
			cached.Inject(func(req *http.Request) *metav1.Status {
				q := req.URL.Query()
				if strings.Contains(req.URL.Path, c.gvr.Resource) && q.Get("sendInitialEvents") == "true" {
					streaming.Add(1)
				}
				if strings.Contains(req.URL.Path, c.gvr.Resource) && q.Get("limit") != "" {
					paged.Add(1)
				}
				return nil
			})
			defer cached.Inject(nil)
			c.create(t, "ns1", "before", "b")
			a := startAgent(t, c, newTarget(), tc.opts)
			a.waitDone(map[string]string{"ns1/before": "b"})
			c.waitCondition(t, "ns1", "before", metav1.ConditionTrue, "Reconciled")

			c.create(t, "ns2", "after", "a")
			a.waitDone(map[string]string{"ns1/before": "b", "ns2/after": "a"})
			c.setValue(t, "ns1", "before", "b2")
			a.waitDone(map[string]string{"ns1/before": "b2", "ns2/after": "a"})
			cond := c.waitCondition(t, "ns1", "before", metav1.ConditionTrue, "Reconciled")
			if cond.ObservedGeneration != 2 {
				t.Fatalf("observedGeneration %d, want 2", cond.ObservedGeneration)
			}
			c.delete(t, "ns2", "after")
			a.waitDone(map[string]string{"ns1/before": "b2"})
			if got := a.settle(); !equalMaps(got, map[string]string{"ns1/before": "b2"}) {
				t.Fatalf("target %v", got)
			}
			if s, p := streaming.Load(), paged.Load(); (s > 0) == tc.opts.disableWatchList || (p > 0) != tc.opts.disableWatchList {
				t.Fatalf("%d streaming lists, %d paged list requests", s, p)
			}
		})
	}
}

// A source scoped to one namespace and a label sees only those objects,
// and an object that leaves the selection leaves the table.
func TestNamespaceAndLabelScoped(t *testing.T) {
	c := newCRD(t, cached)
	labeled := func(ns, name string) {
		u := c.object(ns, name, "v")
		u.SetLabels(map[string]string{"tier": "db"})
		if _, err := c.dyn.Resource(c.gvr).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	labeled("a", "in")
	labeled("b", "other-namespace")
	c.create(t, "a", "unlabeled", "v")
	a := startAgent(t, c, newTarget(), agentOpts{noStatus: true, namespace: "a", labelSelector: "tier=db"})
	a.waitDone(map[string]string{"a/in": "v"})
	labeled("a", "later")
	a.waitDone(map[string]string{"a/in": "v", "a/later": "v"})
	r := c.dyn.Resource(c.gvr).Namespace("a")
	u, err := r.Get(context.Background(), "in", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetLabels(nil)
	if _, err := r.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.waitDone(map[string]string{"a/later": "v"})
}
