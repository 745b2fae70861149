package k8ssource_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-go/converge/k8s/k8ssource"
)

// Startup QPS and burst of the agent's clients: the example's (client-go's
// default of 5/10 would pace a few hundred objects for minutes).
const startupQPS, startupBurst = 50, 100

// BenchmarkStartupAllReady (issue 53.7): n objects (1,000; 3,000) present
// when an operator starts with the finalizer, the kstatus condition and
// Events, its clients at QPS 50 / burst 100 (one limiter for the resource,
// one for Events, as the example builds them): seconds until a watch
// shows every object Ready for its generation (all-ready-s), the requests
// by kind per object, and the floor the resource client's limiter sets
// (its requests / QPS, limiter-floor-s). With Events all and warnings
// only.
func BenchmarkStartupAllReady(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cached.InstallEvents(ctx); err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1000, 3000} {
		for _, ev := range []struct {
			name  string
			types k8ssource.EventTypes
		}{{"events-all", k8ssource.EventsAll}, {"events-warnings", k8ssource.EventsWarnings}} {
			b.Run(fmt.Sprintf("%d/%s", n, ev.name), func(b *testing.B) {
				for b.Loop() {
					startupOnce(b, n, ev.types)
				}
			})
		}
	}
}

func startupOnce(b *testing.B, n int, types k8ssource.EventTypes) {
	c := newCRD(b, cached)
	bulk(b, c, "s", n)
	var res, evs requestCounts
	cfg := cached.Config()
	cfg.QPS, cfg.Burst = startupQPS, startupBurst
	cfg.WrapTransport = res.wrap
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ecfg := cached.Config()
	ecfg.QPS, ecfg.Burst = startupQPS, startupBurst
	ecfg.WrapTransport = evs.wrap
	cs, err := kubernetes.NewForConfig(ecfg)
	if err != nil {
		b.Fatal(err)
	}
	limited := *c
	limited.dyn = dyn
	began := time.Now()
	a := startAgent(b, &limited, newTarget(), agentOpts{statusInterval: time.Second, finalizer: testFinalizer,
		status: func(s *k8ssource.StatusConfig[*unstructured.Unstructured, *obj]) {
			kstatusConfig(s)
			s.Events, s.EventTypes = cs.EventsV1(), types
		}})
	waitAllReady(b, c, "bench", n)
	took := time.Since(began)
	a.stop()
	b.ReportMetric(took.Seconds(), "all-ready-s")
	b.ReportMetric(float64(res.total())/float64(startupQPS), "limiter-floor-s")
	for kind, k := range res.snapshot() {
		b.ReportMetric(float64(k)/float64(n), kind+"/object")
	}
	b.ReportMetric(float64(evs.total())/float64(n), "events-requests/object")
}

// requestCounts counts a client's requests by method and subresource.
type requestCounts struct {
	mu sync.Mutex
	m  map[string]int
}

func (r *requestCounts) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		kind := strings.ToLower(req.Method)
		if strings.HasSuffix(req.URL.Path, "/status") {
			kind += "-status"
		}
		r.mu.Lock()
		if r.m == nil {
			r.m = map[string]int{}
		}
		r.m[kind]++
		r.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

func (r *requestCounts) snapshot() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.m))
	for k, v := range r.m {
		out[k] = v
	}
	return out
}

func (r *requestCounts) total() int {
	t := 0
	for _, v := range r.snapshot() {
		t += v
	}
	return t
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// waitAllReady watches namespace ns of c until n objects are Ready for
// their generation.
func waitAllReady(b *testing.B, c *crd, ns string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r := c.dyn.Resource(c.gvr).Namespace(ns)
	ready := map[string]bool{}
	isReady := func(u *unstructured.Unstructured) bool {
		cond, ok := conditionOfType(u, "Ready")
		return ok && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == u.GetGeneration()
	}
	l, err := r.List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range l.Items {
		ready[l.Items[i].GetName()] = isReady(&l.Items[i])
	}
	count := func() int {
		k := 0
		for _, v := range ready {
			if v {
				k++
			}
		}
		return k
	}
	if count() >= n {
		return
	}
	w, err := r.Watch(ctx, metav1.ListOptions{ResourceVersion: l.GetResourceVersion()})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	k := count()
	for ev := range w.ResultChan() {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		was, now := ready[u.GetName()], isReady(u)
		ready[u.GetName()] = now
		switch {
		case now && !was:
			k++
		case was && !now:
			k--
		}
		if k >= n {
			return
		}
	}
	b.Fatalf("%d of %d objects Ready when the watch ended", k, n)
}
