package k8ssource_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-go/converge/k8s/apiservertest"
	"github.com/converge-go/converge/k8s/k8ssource"
	"github.com/converge-go/converge/source"
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
	b.Run("api-server", benchWatchEvents)
	b.Run("source-alone", benchSourceAlone)
}

func benchWatchEvents(b *testing.B) {
	const n = 20000
	for b.Loop() {
		c := newCRD(b, cached)
		a := startAgent(b, c, newTarget(), agentOpts{noStatus: true, noReconciler: true})
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

// benchSourceAlone: the same objects' events, already decoded, from a
// ListerWatcher in memory through the source (the k8ssource Transform
// and the table), without the API server: the source layer's share.
func benchSourceAlone(b *testing.B) {
	const n = 200_000
	events := make([]source.Event[*unstructured.Unstructured], n)
	c := &crd{apiVersion: "test.converge.dev/v1", kind: "Thing"}
	for i := range events {
		u := c.object("bench", fmt.Sprintf("s%06d", i), fmt.Sprint(i))
		u.SetResourceVersion(fmt.Sprint(i + 2))
		events[i] = source.Event[*unstructured.Unstructured]{Kind: source.Upsert, Key: k8ssource.Key(u), Item: u, Resume: u.GetResourceVersion()}
	}
	lw := source.Funcs[*unstructured.Unstructured]{
		ListFunc: func(context.Context) (source.ListResult[*unstructured.Unstructured], error) {
			return source.ListResult[*unstructured.Unstructured]{Resume: "1"}, nil
		},
		WatchFunc: func(ctx context.Context, resume string, emit func(source.Event[*unstructured.Unstructured]) error) error {
			if resume != "1" {
				<-ctx.Done() // every event delivered once
				return ctx.Err()
			}
			for _, ev := range events {
				if err := emit(ev); err != nil {
					return err
				}
			}
			<-ctx.Done()
			return ctx.Err()
		},
	}
	for b.Loop() {
		f := &agent{t: b, log: slog.New(slog.DiscardHandler)}
		began := time.Now()
		f.hive = hive.New(statedb.Cell, job.Cell, cell.Provide(cell.NewSimpleHealth),
			cell.Module("alone", "Source alone", cell.Provide(job.Registry.NewGroup),
				cell.Invoke(func(db *statedb.DB, p source.Params) (err error) {
					f.db = db
					if f.table, err = statedb.NewTable(db, "objects", keyIndex); err != nil {
						return err
					}
					f.src, err = source.New(source.Config[*unstructured.Unstructured, *obj]{
						Name: "alone", Table: f.table, ListerWatcher: lw,
						Transform: func(_ string, u *unstructured.Unstructured) ([]*obj, error) { return transform(u) },
						Equal:     func(a, b *obj) bool { return *a == *b },
					}, p)
					return err
				})))
		if err := f.hive.Start(f.log, context.Background()); err != nil {
			b.Fatal(err)
		}
		f.waitTable("events", func(txn statedb.ReadTxn) bool { return f.table.NumObjects(txn) == n })
		b.ReportMetric(n/time.Since(began).Seconds(), "objects/sec")
		f.stop()
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
// of a client-go informer on the same server, in the same run. The three
// alternate, listRounds times each, each after a garbage collection that
// is not timed (so that none pays for the garbage of the one before), and
// the medians are reported; ratio is the streaming source's over the
// informer's.
func BenchmarkInitialList(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		c := newCRD(b, cached)
		bulk(b, c, "l", n)
		// Let the API server's watch cache take them in before measuring.
		if err := informerSync(c, func(cache.Store) {}); err != nil {
			b.Fatal(err)
		}
		streaming := func() {
			a := startAgent(b, c, newTarget(), agentOpts{noStatus: true, noReconciler: true})
			a.waitInitialized()
			a.stop()
		}
		paged := func() {
			a := startAgent(b, c, newTarget(), agentOpts{noStatus: true, noReconciler: true, disableWatchList: true})
			a.waitInitialized()
			a.stop()
		}
		informer := func() {
			if err := informerSync(c, func(cache.Store) {}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			for b.Loop() {
				var rates [3][]float64
				for range listRounds {
					for i, run := range []func(){streaming, paged, informer} {
						goruntime.GC()
						began := time.Now()
						run()
						rates[i] = append(rates[i], float64(n)/time.Since(began).Seconds())
					}
				}
				b.ReportMetric(median(rates[0]), "source-streaming-objects/sec")
				b.ReportMetric(median(rates[1]), "source-paged-objects/sec")
				b.ReportMetric(median(rates[2]), "informer-objects/sec")
				b.ReportMetric(median(rates[0])/median(rates[2]), "ratio")
			}
		})
	}
}

// listRounds is how many times each way of listing runs per size.
const listRounds = 3

func median(xs []float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[len(xs)/2]
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
