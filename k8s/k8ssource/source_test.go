package k8ssource_test

import (
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
