package k8ssource_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/converge-go/converge/k8s/apiservertest"
	"github.com/converge-go/converge/k8s/k8ssource"
	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
)

// obj is a table object made from one custom resource: its key, the
// custom resource's key (namespace/name), spec.value and generation.
type obj struct {
	Key, Item, Value string
	Gen              int64
	Status           reconciler.Status
}

func (o *obj) TableHeader() []string { return []string{"Key", "Value", "Gen", "Status"} }
func (o *obj) TableRow() []string {
	return []string{o.Key, o.Value, fmt.Sprint(o.Gen), o.Status.Kind.String()}
}

var keyIndex = statedb.Index[*obj, string]{
	Name:       "key",
	FromObject: func(o *obj) index.KeySet { return index.NewKeySet(index.String(o.Key)) },
	FromKey:    index.String,
	FromString: index.FromString,
	Unique:     true,
}

// errBadSpec is what transform returns for a spec.value that starts with
// "bad".
var errBadSpec = errors.New("spec.value must not start with \"bad\"")

// transform makes one table object of key namespace/name from a custom
// resource; none for spec.value "none", and n (keys namespace/name#i)
// for "rows:<n>".
func transform(u *unstructured.Unstructured) ([]*obj, error) {
	v, _, _ := unstructured.NestedString(u.Object, "spec", "value")
	item := k8ssource.Key(u)
	switch {
	case strings.HasPrefix(v, "bad"):
		return nil, fmt.Errorf("%s: %w", k8ssource.Quote(v), errBadSpec)
	case v == "none":
		return nil, nil
	case strings.HasPrefix(v, "rows:"):
		n, err := strconv.Atoi(strings.TrimPrefix(v, "rows:"))
		if err != nil {
			return nil, err
		}
		objs := make([]*obj, n)
		for i := range objs {
			objs[i] = &obj{Key: fmt.Sprintf("%s#%d", item, i), Item: item, Value: v, Gen: u.GetGeneration()}
		}
		return objs, nil
	}
	return []*obj{{Key: item, Item: item, Value: v, Gen: u.GetGeneration()}}, nil
}

func equalObjs(a, b *obj) bool {
	return a.Key == b.Key && a.Item == b.Item && a.Value == b.Value && a.Gen == b.Gen
}

// crd is one test's custom resource type on a server.
type crd struct {
	srv        *apiservertest.Server
	gvr        schema.GroupVersionResource
	apiVersion string
	kind       string
	dyn        dynamic.Interface
}

var crdSeq atomic.Int64

// newCRD installs a CRD of a name no other test uses.
func newCRD(t testing.TB, srv *apiservertest.Server) *crd {
	t.Helper()
	return newCRDWith(t, srv, func(*apiextensionsv1.CustomResourceDefinition) {})
}

// mapListCRD is the definition newCRD installs for c.
func mapListCRD(c *crd) *apiextensionsv1.CustomResourceDefinition {
	return apiservertest.CRD(c.gvr.Group, c.kind, c.gvr.Resource)
}

// newCRDWith installs a CRD of a name no other test uses, as edit
// changes newCRD's.
func newCRDWith(t testing.TB, srv *apiservertest.Server, edit func(*apiextensionsv1.CustomResourceDefinition)) *crd {
	t.Helper()
	n := crdSeq.Add(1)
	group := "test.converge.dev"
	plural := fmt.Sprintf("things%d", n)
	def := apiservertest.CRD(group, fmt.Sprintf("Thing%d", n), plural)
	edit(def)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.InstallCRD(ctx, def); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	return &crd{srv: srv, gvr: apiservertest.GVR(def), apiVersion: group + "/v1", kind: def.Spec.Names.Kind, dyn: dyn}
}

// target is the fake outside world: key -> value, with the keys whose
// Update fails or waits, and the number of Prune calls.
type target struct {
	discard bool // Update records nothing (benchmarks)
	mu      sync.Mutex
	state   map[string]string
	fail    map[string]error
	delFail map[string]error
	held    map[string]chan struct{}
	updates map[string]int
	prunes  int
}

func newTarget() *target {
	return &target{state: map[string]string{}, fail: map[string]error{}, delFail: map[string]error{},
		held: map[string]chan struct{}{}, updates: map[string]int{}}
}

// setDeleteFail makes the Deletes of key fail with err (nil: succeed).
func (tg *target) setDeleteFail(key string, err error) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if err == nil {
		delete(tg.delFail, key)
	} else {
		tg.delFail[key] = err
	}
}

// updateCount is how many Updates of key ran.
func (tg *target) updateCount(key string) int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.updates[key]
}

// hold makes the Updates of key wait until release is called (or their
// context ends).
func (tg *target) hold(key string) (release func()) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	ch := make(chan struct{})
	tg.held[key] = ch
	return func() {
		tg.mu.Lock()
		defer tg.mu.Unlock()
		if tg.held[key] == ch {
			delete(tg.held, key)
			close(ch)
		}
	}
}

func (tg *target) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, o *obj) error {
	tg.mu.Lock()
	held := tg.held[o.Key]
	tg.mu.Unlock()
	if held != nil {
		select {
		case <-held:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.updates[o.Key]++
	if err := tg.fail[o.Key]; err != nil {
		return err
	}
	if !tg.discard {
		tg.state[o.Key] = o.Value
	}
	return nil
}

func (tg *target) Delete(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, o *obj) error {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if err := tg.delFail[o.Key]; err != nil {
		return err
	}
	delete(tg.state, o.Key)
	return nil
}

func (tg *target) Prune(_ context.Context, _ statedb.ReadTxn, objs iter.Seq2[*obj, statedb.Revision]) error {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.prunes++
	keep := map[string]bool{}
	for o := range objs {
		keep[o.Key] = true
	}
	for k := range tg.state {
		if !keep[k] {
			delete(tg.state, k)
		}
	}
	return nil
}

func (tg *target) setFail(key string, err error) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if err == nil {
		delete(tg.fail, key)
	} else {
		tg.fail[key] = err
	}
}

func (tg *target) snapshot() map[string]string {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return maps.Clone(tg.state)
}

// agent is a hive with a Kubernetes source of one CRD, a converge
// reconciler onto a target, and (with status) the status writer.
type agent struct {
	t      testing.TB
	db     *statedb.DB
	table  statedb.RWTable[*obj]
	src    source.Source
	rec    reconciler.Reconciler[*obj]
	health *cell.SimpleHealth
	target *target
	hive   *hive.Hive
	log    *slog.Logger
}

type agentOpts struct {
	noStatus         bool
	status           func(*k8ssource.StatusConfig[*unstructured.Unstructured, *obj]) // changes the status config
	transform        func(*unstructured.Unstructured) ([]*obj, error)                // default transform
	name             string                                                          // the source's; default "k8s"
	finalizer        string                                                          // the source\'s finalizer, explained by the agent\'s reconciler
	disableWatchList bool
	statusInterval   time.Duration
	owns             func(string) bool
	ownsChanged      func() <-chan struct{}
	namespace        string
	labelSelector    string
	noReconciler     bool // benchmarks of the source alone
	secondaries      []k8ssource.SecondaryResource
}

func startAgentOwned(t testing.TB, c *crd, owns func(string) bool, changed func() <-chan struct{}) *agent {
	return startAgent(t, c, newTarget(), agentOpts{statusInterval: 1, owns: owns, ownsChanged: changed})
}

func startAgent(t testing.TB, c *crd, tg *target, o agentOpts) *agent {
	t.Helper()
	a := &agent{t: t, target: tg, log: hivetest.Logger(t, hivetest.LogLevel(slog.LevelError))}
	a.hive = hive.New(
		statedb.Cell, job.Cell,
		cell.Provide(cell.NewSimpleHealth),
		cell.Module("test", "Test",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db *statedb.DB, p source.Params, rp reconciler.Params, h *cell.SimpleHealth) (err error) {
				a.db, a.health = db, h
				if a.table, err = statedb.NewTable(db, "objects", keyIndex); err != nil {
					return err
				}
				if !o.noReconciler {
					if err := a.startReconciler(tg, rp); err != nil {
						return err
					}
				}
				a.src, err = newSource(c, a.table, o, p, a.rec)
				return err
			}),
		),
	)
	if err := a.hive.Start(a.log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.stop)
	return a
}

// newSource is the agent's Kubernetes source of c into table.
func newSource(c *crd, table statedb.RWTable[*obj], o agentOpts, p source.Params, rec reconciler.Reconciler[*obj]) (source.Source, error) {
	tf, name := o.transform, o.name
	if tf == nil {
		tf = transform
	}
	if name == "" {
		name = "k8s"
	}
	cfg := k8ssource.Config[*unstructured.Unstructured, *obj]{
		Client:               k8ssource.Dynamic(c.dyn.Resource(c.gvr), o.namespace),
		ListerWatcherOptions: k8ssource.ListerWatcherOptions{DisableWatchList: o.disableWatchList, LabelSelector: o.labelSelector},
		Transform:            tf,
		Secondaries:          o.secondaries,
		Source: source.Config[*unstructured.Unstructured, *obj]{
			Name:       name,
			Table:      table,
			Equal:      equalObjs,
			Pending:    func(o *obj) *obj { o.Status = reconciler.StatusPending(); return o },
			BackoffMin: 10 * time.Millisecond,
			BackoffMax: 200 * time.Millisecond,
		},
	}
	if !o.noStatus {
		cfg.Status = &k8ssource.StatusConfig[*unstructured.Unstructured, *obj]{
			Client: c.dyn, Resource: c.gvr, APIVersion: c.apiVersion, Kind: c.kind,
			ItemKey:         func(o *obj) string { return o.Item },
			GetObjectStatus: func(o *obj) reconciler.Status { return o.Status },
			Owns:            o.owns,
			OwnsChanged:     o.ownsChanged,
			MinInterval:     o.statusInterval,
			BackoffMin:      10 * time.Millisecond,
			BackoffMax:      200 * time.Millisecond,
		}
		if o.status != nil {
			o.status(cfg.Status)
		}
	}
	if o.finalizer != "" {
		cfg.Finalizer = &k8ssource.FinalizerConfig[*obj]{
			Name:       o.finalizer,
			Explainers: []k8ssource.Explainer{rec},
			Unset:      func(o *obj) *obj { o.Status = reconciler.StatusUnset(); return o },
		}
	}
	return k8ssource.New(cfg, p)
}

// stop stops the hive; a second call does nothing.
func (a *agent) stop() {
	if a.hive == nil {
		return
	}
	if err := a.hive.Stop(a.log, context.Background()); err != nil {
		a.t.Error(err)
	}
	a.hive = nil
}

// startReconciler registers the agent's reconciler onto tg.
func (a *agent) startReconciler(tg *target, rp reconciler.Params) (err error) {
	a.rec, err = reconciler.New(reconciler.Config[*obj]{
		Table:                      a.table,
		GetObjectStatus:            func(o *obj) reconciler.Status { return o.Status },
		SetObjectStatus:            func(o *obj, s reconciler.Status) *obj { o.Status = s; return o },
		CloneObject:                func(o *obj) *obj { c := *o; return &c },
		Operations:                 tg,
		RetryBackoffMin:            10 * time.Millisecond,
		RetryBackoffMax:            100 * time.Millisecond,
		FullReconciliationInterval: reconciler.Off,
		RefreshInterval:            reconciler.Off,
	}, rp)
	return err
}
