package crtest

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/converge-go/converge/k8s/apiservertest"
	"github.com/converge-go/converge/k8s/k8ssource"
	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
)

// The clients' QPS and burst on both sides: the desiredfile example's.
const startupQPS, startupBurst = 50, 100

const startupFinalizer = "crtest.converge.dev/cleanup"

// BenchmarkStartupVsControllerRuntime (issue 53.7): n objects (1,000;
// 3,000) present at start, each to be made Ready (a condition with
// observedGeneration) behind a finalizer, by a converge operator
// (k8ssource with Status and Finalizer, a reconciler onto a target that
// does nothing) and by a controller-runtime one (one worker; Get from
// its cache, Update to add the finalizer, Status().Update for the
// condition), side by side in one run, each on its own resource, with
// the same QPS and burst. No Events on either side (client-go's events
// library has a client and limiter of its own in both). Reported: the
// seconds from start until a watch shows every object Ready, and the
// ratio converge/controller-runtime (goal: <= 1), and the requests each
// made per object (its informer's or source's list and watch included).
func BenchmarkStartupVsControllerRuntime(b *testing.B) {
	ctrl.SetLogger(logr.Discard())
	for _, n := range []int{1000, 3000} {
		b.Run(fmt.Sprintf("%d", n), func(b *testing.B) {
			for b.Loop() {
				var convReq, crReq atomic.Int64
				conv := startupConverge(b, n, &convReq)
				cr := startupControllerRuntime(b, n, &crReq)
				b.ReportMetric(conv.Seconds(), "converge-all-ready-s")
				b.ReportMetric(cr.Seconds(), "controller-runtime-all-ready-s")
				b.ReportMetric(float64(convReq.Load())/float64(n), "converge-requests/object")
				b.ReportMetric(float64(crReq.Load())/float64(n), "controller-runtime-requests/object")
				b.ReportMetric(conv.Seconds()/cr.Seconds(), "ratio")
			}
		})
	}
}

var benchSeq int

// benchCRD installs a CRD of its own with n objects in namespace
// "bench", and returns its resource.
func benchCRD(b *testing.B, n int) schema.GroupVersionResource {
	benchSeq++
	def := apiservertest.CRD("crtest.converge.dev", fmt.Sprintf("Bench%d", benchSeq), fmt.Sprintf("benches%d", benchSeq))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := srv.InstallCRD(ctx, def); err != nil {
		b.Fatal(err)
	}
	gvr := apiservertest.GVR(def)
	objs := make([]*unstructured.Unstructured, n)
	for i := range objs {
		objs[i] = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": gvr.GroupVersion().String(), "kind": def.Spec.Names.Kind,
			"metadata": map[string]any{"namespace": "bench", "name": fmt.Sprintf("o%05d", i)},
			"spec":     map[string]any{"value": fmt.Sprint(i)},
		}}
	}
	if err := srv.PutRaw(ctx, gvr, objs); err != nil {
		b.Fatal(err)
	}
	return gvr
}

// limitedConfig is the clients' configuration at startupQPS and
// startupBurst, each request counted in requests.
func limitedConfig(requests *atomic.Int64) *rest.Config {
	cfg := srv.Config()
	cfg.QPS, cfg.Burst = startupQPS, startupBurst
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			requests.Add(1)
			return rt.RoundTrip(req)
		})
	}
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// row is the converge side's table object.
type row struct {
	Key    string
	Gen    int64
	Status reconciler.Status
}

// TableHeader and TableRow make the table printable.
func (r *row) TableHeader() []string { return []string{"Key", "Gen", "Status"} }

// TableRow implements statedb.TableWritable.
func (r *row) TableRow() []string {
	return []string{r.Key, fmt.Sprint(r.Gen), r.Status.Kind.String()}
}

var rowKey = statedb.Index[*row, string]{
	Name:       "key",
	FromObject: func(r *row) index.KeySet { return index.NewKeySet(index.String(r.Key)) },
	FromKey:    index.String,
	FromString: index.FromString,
	Unique:     true,
}

// nopOps is a target that takes everything at once.
type nopOps struct{}

func (nopOps) Update(context.Context, statedb.ReadTxn, statedb.Revision, *row) error { return nil }
func (nopOps) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *row) error { return nil }
func (nopOps) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*row, statedb.Revision]) error {
	return nil
}

func startupConverge(b *testing.B, n int, requests *atomic.Int64) time.Duration {
	gvr := benchCRD(b, n)
	dyn, err := dynamic.NewForConfig(limitedConfig(requests))
	if err != nil {
		b.Fatal(err)
	}
	kind := "Bench" + gvr.Resource[len("benches"):]
	h := hive.New(statedb.Cell, job.Cell, cell.Provide(cell.NewSimpleHealth),
		cell.Module("bench", "Bench",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db *statedb.DB, p source.Params, rp reconciler.Params) error {
				tbl, err := statedb.NewTable(db, "rows", rowKey)
				if err != nil {
					return err
				}
				rec, err := reconciler.New(reconciler.Config[*row]{
					Table:           tbl,
					GetObjectStatus: func(r *row) reconciler.Status { return r.Status },
					SetObjectStatus: func(r *row, s reconciler.Status) *row { r.Status = s; return r },
					CloneObject:     func(r *row) *row { c := *r; return &c },
					Operations:      nopOps{},
				}, rp)
				if err != nil {
					return err
				}
				return k8ssource.Register(k8ssource.Config[*unstructured.Unstructured, *row]{
					Client: k8ssource.Dynamic(dyn.Resource(gvr), ""),
					Transform: func(u *unstructured.Unstructured) ([]*row, error) {
						return []*row{{Key: k8ssource.Key(u), Gen: u.GetGeneration()}}, nil
					},
					Status: &k8ssource.StatusConfig[*unstructured.Unstructured, *row]{
						Client: dyn, Resource: gvr, APIVersion: gvr.GroupVersion().String(), Kind: kind,
						ConditionType: "Ready", ObservedGeneration: true, Stalled: true,
						ItemKey:         func(r *row) string { return r.Key },
						GetObjectStatus: func(r *row) reconciler.Status { return r.Status },
					},
					Finalizer: &k8ssource.FinalizerConfig[*row]{
						Name: startupFinalizer, Explainers: []k8ssource.Explainer{rec},
						Unset: func(r *row) *row { r.Status = reconciler.StatusUnset(); return r },
					},
					Source: source.Config[*unstructured.Unstructured, *row]{
						Name: "bench", Table: tbl,
						Equal:   func(a, b *row) bool { return a.Key == b.Key && a.Gen == b.Gen },
						Pending: func(r *row) *row { r.Status = reconciler.StatusPending(); return r },
					},
				}, p)
			})))
	log := slog.New(slog.DiscardHandler)
	began := time.Now()
	if err := h.Start(log, context.Background()); err != nil {
		b.Fatal(err)
	}
	waitAllReady(b, gvr, n)
	took := time.Since(began)
	if err := h.Stop(log, context.Background()); err != nil {
		b.Fatal(err)
	}
	return took
}

// crReconciler is the controller-runtime operator: the finalizer first,
// then the work (none), then the Ready condition.
type crReconciler struct {
	c   client.Client
	gvk schema.GroupVersionKind
}

func (r *crReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(r.gvk)
	if err := r.c.Get(ctx, req.NamespacedName, u); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if u.GetDeletionTimestamp() != nil {
		if controllerutil.RemoveFinalizer(u, startupFinalizer) {
			return ctrl.Result{}, r.c.Update(ctx, u)
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(u, startupFinalizer) {
		return ctrl.Result{}, r.c.Update(ctx, u)
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var typed []metav1.Condition
	for _, c := range conds {
		m, _ := c.(map[string]any)
		s, _ := m["status"].(string)
		t, _ := m["type"].(string)
		g, _ := m["observedGeneration"].(int64)
		typed = append(typed, metav1.Condition{Type: t, Status: metav1.ConditionStatus(s), ObservedGeneration: g})
	}
	if c := meta.FindStatusCondition(typed, "Ready"); c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == u.GetGeneration() {
		return ctrl.Result{}, nil
	}
	ready := map[string]any{
		"type": "Ready", "status": "True", "reason": "Reconciled", "message": "reconciled",
		"observedGeneration": u.GetGeneration(), "lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	}
	_ = unstructured.SetNestedSlice(u.Object, []any{ready}, "status", "conditions")
	_ = unstructured.SetNestedField(u.Object, u.GetGeneration(), "status", "observedGeneration")
	return ctrl.Result{}, r.c.Status().Update(ctx, u)
}

func startupControllerRuntime(b *testing.B, n int, requests *atomic.Int64) time.Duration {
	gvr := benchCRD(b, n)
	kind := "Bench" + gvr.Resource[len("benches"):]
	gvk := gvr.GroupVersion().WithKind(kind)
	began := time.Now()
	mgr, err := ctrl.NewManager(limitedConfig(requests), ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		b.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	skip := true
	if err := ctrl.NewControllerManagedBy(mgr).For(u).Named(gvr.Resource).
		WithOptions(controller.Options{SkipNameValidation: &skip}).
		Complete(&crReconciler{c: mgr.GetClient(), gvk: gvk}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	waitAllReady(b, gvr, n)
	took := time.Since(began)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return took
}

// waitAllReady watches namespace "bench" of gvr until n objects are
// Ready for their generation.
func waitAllReady(b *testing.B, gvr schema.GroupVersionResource, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(srv.Config())
	if err != nil {
		b.Fatal(err)
	}
	r := dyn.Resource(gvr).Namespace("bench")
	isReady := func(u *unstructured.Unstructured) bool {
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Ready" && m["status"] == "True" && m["observedGeneration"] == u.GetGeneration() {
				return true
			}
		}
		return false
	}
	l, err := r.List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ready, k := map[string]bool{}, 0
	for i := range l.Items {
		if isReady(&l.Items[i]) {
			ready[l.Items[i].GetName()] = true
			k++
		}
	}
	if k >= n {
		return
	}
	w, err := r.Watch(ctx, metav1.ListOptions{ResourceVersion: l.GetResourceVersion()})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		was, now := ready[u.GetName()], isReady(u)
		ready[u.GetName()] = now
		if now && !was {
			k++
		} else if was && !now {
			k--
		}
		if k >= n {
			return
		}
	}
	b.Fatalf("%d of %d Ready when the watch ended", k, n)
}
