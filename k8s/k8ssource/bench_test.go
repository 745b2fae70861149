package k8ssource_test

import (
	"context"
	"fmt"
	"net/http"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/statedb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-go/converge/k8s/internal/apiservertest"
	"github.com/converge-go/converge/reconciler"
)

// The Kubernetes rows of the benchmark table (issue 34), each against the
// in-process API server. scripts/bench.sh runs them:
//
//	cd k8s && go test -run '^$' -bench . -benchtime 1x ./k8ssource/

// bulk puts n objects of c into etcd and returns the table they make.
func bulk(b *testing.B, c *crd, prefix string, n int) map[string]string {
	objs := make([]*unstructured.Unstructured, n)
	want := make(map[string]string, n)
	for i := range objs {
		name := fmt.Sprintf("%s%06d", prefix, i)
		objs[i] = c.object("bench", name, fmt.Sprint(i))
		want["bench/"+name] = fmt.Sprint(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.srv.PutRaw(ctx, c.gvr, objs); err != nil {
		b.Fatal(err)
	}
	return want
}

// waitInitialized waits until the agent's table is initialized.
func (a *agent) waitInitialized() {
	a.waitTable("initialized", func(txn statedb.ReadTxn) bool { init, _ := a.table.Initialized(txn); return init })
}

// BenchmarkWatchEvents: objects created while the source's watch is
// down, then delivered by the API server's watch (from its watch cache)
// as fast as the source takes them: objects/sec from the source's new
// watch request until all are in the table (the reconciler's target does
// nothing).
func BenchmarkWatchEvents(b *testing.B) {
	const n = 20000
	for b.Loop() {
		c := newCRD(b, cached)
		tg := newTarget()
		tg.discard = true
		a := startAgent(b, c, tg, agentOpts{noStatus: true})
		a.waitInitialized()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := cached.WaitWatches(ctx, 1); err != nil {
			b.Fatal(err)
		}
		cancel()
		var (
			blocked  atomic.Bool
			mu       sync.Mutex
			released time.Time
		)
		blocked.Store(true)
		cached.Inject(func(req *http.Request) *metav1.Status {
			if req.URL.Query().Get("watch") != "true" || !strings.Contains(req.URL.Path, c.gvr.Resource) {
				return nil
			}
			if blocked.Load() {
				return apiservertest.Status(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "paused")
			}
			mu.Lock()
			if released.IsZero() {
				released = time.Now()
			}
			mu.Unlock()
			return nil
		})
		cached.CutWatches()
		want := bulk(b, c, "w", n)
		blocked.Store(false)
		a.waitTable("events", func(txn statedb.ReadTxn) bool { return a.table.NumObjects(txn) == len(want) })
		mu.Lock()
		took := time.Since(released)
		mu.Unlock()
		cached.Inject(nil)
		b.ReportMetric(n/took.Seconds(), "objects/sec")
		a.stop()
	}
}

// BenchmarkApplyToCondition runs before the benchmarks that leave 300k
// objects in the in-process API server, whose heap (and GC pauses) this
// process shares.
//
// BenchmarkApplyToCondition: a client changes objects at 50 per second;
// each change is timed from the update request until a watch shows the
// object's Reconciled condition True for the new generation.
func BenchmarkApplyToCondition(b *testing.B) {
	// Each object changes every 2 s, more rarely than the status
	// writer's default MinInterval of 1 s.
	const objects, changes = 100, 500
	for b.Loop() {
		c := newCRD(b, cached)
		for i := range objects {
			c.create(b, "bench", fmt.Sprintf("t%03d", i), "0")
		}
		a := startAgent(b, c, newTarget(), agentOpts{})
		for i := range objects {
			c.waitCondition(b, "bench", fmt.Sprintf("t%03d", i), metav1.ConditionTrue, "Reconciled")
		}
		lat := trickle(b, c, objects, changes)
		a.stop()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// BenchmarkInitialList: the first list of 10k and 100k objects into the
// table, by the source (streaming list; paged list), and the initial sync
// of a client-go informer on the same server, in the same run.
func BenchmarkInitialList(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		c := newCRD(b, cached)
		bulk(b, c, "l", n)
		// Let the API server's watch cache take them in before measuring.
		if err := informerSync(c, func(cache.Store) {}); err != nil {
			b.Fatal(err)
		}
		for _, mode := range []struct {
			name string
			opts agentOpts
		}{{"source-streaming", agentOpts{noStatus: true}}, {"source-paged", agentOpts{noStatus: true, disableWatchList: true}}} {
			b.Run(fmt.Sprintf("%s/%dk", mode.name, n/1000), func(b *testing.B) {
				for b.Loop() {
					began := time.Now()
					a := startAgent(b, c, newTarget(), mode.opts)
					a.waitInitialized()
					b.ReportMetric(float64(n)/time.Since(began).Seconds(), "objects/sec")
					a.stop()
				}
			})
		}
		b.Run(fmt.Sprintf("informer/%dk", n/1000), func(b *testing.B) {
			for b.Loop() {
				began := time.Now()
				if err := informerSync(c, func(cache.Store) {}); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(n)/time.Since(began).Seconds(), "objects/sec")
			}
		})
	}
}

// informerSync runs a client-go informer of c until it has synced, calls
// synced with its store, and stops it.
func informerSync(c *crd, synced func(cache.Store)) error {
	dyn, err := dynamic.NewForConfig(c.srv.Config())
	if err != nil {
		return err
	}
	r := dyn.Resource(c.gvr)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return r.List(ctx, o)
		},
		WatchFuncWithContext: r.Watch,
	}
	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inf.RunWithContext(ctx) }()
	ok := cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	if ok {
		synced(inf.GetStore())
	}
	cancel()
	<-done
	if !ok {
		return fmt.Errorf("informer never synced")
	}
	return nil
}

// heap returns the live heap after a full collection.
func heap() uint64 {
	goruntime.GC()
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkMemory: the live heap of 100k objects as the table the source
// feeds, against a client-go informer's store plus the same table built
// from it (what a program that feeds its table from an informer holds).
// Two shapes of object: "tiny" (a one-field spec and the least metadata)
// and "applied" (what kubectl apply leaves: labels, the
// last-applied-configuration annotation, a ten-field spec). The API
// server runs in this process: its heap is measured too, after it has
// settled, so each figure carries some of its noise.
func BenchmarkMemory(b *testing.B) {
	const n = 100_000
	for _, shape := range []string{"tiny", "applied"} {
		b.Run(shape, func(b *testing.B) {
			c := newCRD(b, cached)
			objs := make([]*unstructured.Unstructured, n)
			for i := range objs {
				objs[i] = c.object("bench", fmt.Sprintf("m%06d", i), fmt.Sprint(i))
				if shape == "applied" {
					applied(objs[i])
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := c.srv.PutRaw(ctx, c.gvr, objs); err != nil {
				b.Fatal(err)
			}
			objs = nil
			// Let the API server's watch cache take them in: it shares the heap.
			if err := informerSync(c, func(cache.Store) {}); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				source, informer := memory(b, c, n)
				b.ReportMetric(float64(source)/n, "source-B/object")
				b.ReportMetric(float64(informer)/n, "informer+table-B/object")
				b.ReportMetric(float64(source)/float64(informer), "ratio")
			}
		})
	}
}

// applied gives u what a kubectl apply of a real manifest leaves on it.
func applied(u *unstructured.Unstructured) {
	spec := map[string]any{}
	for i := range 10 {
		spec[fmt.Sprintf("field%d", i)] = fmt.Sprintf("value-%d-%s", i, u.GetName())
	}
	v, _, _ := unstructured.NestedString(u.Object, "spec", "value")
	spec["value"] = v
	u.Object["spec"] = spec
	u.SetLabels(map[string]string{"app.kubernetes.io/name": "bench", "app.kubernetes.io/part-of": "converge", "tier": "backend"})
	last, _ := u.MarshalJSON()
	u.SetAnnotations(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": string(last)})
}

// memory returns the live heap the source's table takes for c's n
// objects, and what an informer's store plus the same table take.
func memory(b *testing.B, c *crd, n int) (source, informer uint64) {
	base := heap()
	tg := newTarget()
	tg.discard = true // the target's copy is not the program's memory
	a := startAgent(b, c, tg, agentOpts{noStatus: true})
	a.waitInitialized()
	a.waitTable("done", func(txn statedb.ReadTxn) bool { _, done := a.rows(txn); return done })
	source = heap() - base
	a.stop()

	base = heap()
	var held []*obj
	var store cache.Store
	err := informerSync(c, func(s cache.Store) {
		store = s
		for _, it := range s.List() {
			objs, _ := transform(it.(*unstructured.Unstructured))
			held = append(held, objs...)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	// The same table as the source's, built from the informer's store.
	db := statedb.New()
	tbl, err := statedb.NewTable(db, "objects", keyIndex)
	if err != nil {
		b.Fatal(err)
	}
	wtxn := db.WriteTxn(tbl)
	for _, o := range held {
		o.Status = reconciler.StatusDone()
		tbl.Insert(wtxn, o)
	}
	wtxn.Commit()
	held = nil
	informer = heap() - base
	goruntime.KeepAlive(store)
	goruntime.KeepAlive(tbl)
	if len(store.List()) != n {
		b.Fatalf("informer holds %d objects", len(store.List()))
	}
	return source, informer
}

// trickle changes spec.value of the objects in turn, one every 20 ms,
// changes times in all, and returns each change's latency until a watch
// shows its condition.
func trickle(b *testing.B, c *crd, objects, changes int) []time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := c.dyn.Resource(c.gvr).Namespace("bench")
	w, err := r.Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	type sent struct {
		name string
		gen  int64
	}
	start := map[sent]time.Time{}
	var lat []time.Duration
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := 0; len(lat) < changes; {
		var ev watch.Event
		select {
		case <-ctx.Done():
			b.Fatalf("%d of %d conditions seen", len(lat), changes)
		case <-tick.C:
			if i == changes {
				continue
			}
			name := fmt.Sprintf("t%03d", i%objects)
			began := time.Now()
			u, err := r.Apply(ctx, name, c.object("bench", name, fmt.Sprint(i)), metav1.ApplyOptions{FieldManager: "kubectl", Force: true})
			if err != nil {
				b.Fatal(err)
			}
			start[sent{name, u.GetGeneration()}] = began
			i++
			continue
		case ev = <-w.ResultChan():
		}
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		cond, ok := reconciled(u)
		key := sent{u.GetName(), cond.ObservedGeneration}
		if began, pending := start[key]; ok && pending && cond.Status == metav1.ConditionTrue {
			lat = append(lat, time.Since(began))
			delete(start, key)
		}
	}
	return lat
}
