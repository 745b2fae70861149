package metrics_test

import (
	"context"
	"errors"
	"expvar"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/converge-go/converge/metrics"
	"github.com/converge-go/converge/reconciler"
)

// app is an application hive: statedb, jobs, the given metrics cell, and a
// module whose reconciler is added with reconciler.Register and no
// Config.Metrics, so it takes the module default.
type app struct {
	hive  *hive.Hive
	db    *statedb.DB
	table statedb.RWTable[*object]
}

func newApp(t *testing.T, moduleID string, metricsCell cell.Cell, extra ...cell.Cell) *app {
	a := &app{}
	target := newTarget()
	a.hive = hive.New(append([]cell.Cell{
		statedb.Cell,
		job.Cell,
		cell.Provide(cell.NewSimpleHealth),
		metricsCell,
		cell.Module(moduleID, "Application",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db *statedb.DB, p reconciler.Params) (err error) {
				a.db = db
				a.table, err = statedb.NewTable(db, "objects", idIndex, statusIndex)
				if err != nil {
					return err
				}
				return reconciler.Register(config(a.table, target, "routes"), p)
			}),
		),
	}, extra...)...)
	log := hivetest.Logger(t)
	if err := a.hive.Start(log, context.Background()); err != nil {
		t.Fatalf("hive start: %s", err)
	}
	t.Cleanup(func() {
		if err := a.hive.Stop(log, context.Background()); err != nil {
			t.Errorf("hive stop: %s", err)
		}
	})
	return a
}

// reconcile inserts objects and waits until they are Done. Operations are
// recorded before their results are committed, so their counters are final
// once the statuses are.
func (a *app) reconcile(t *testing.T, ids ...string) {
	t.Helper()
	wtxn := a.db.WriteTxn(a.table)
	for _, id := range ids {
		a.table.Insert(wtxn, &object{ID: id, Status: reconciler.StatusPending()})
	}
	wtxn.Commit()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := reconciler.WaitForReconciliation(ctx, a.db, a.table.ToTable(), statusIndex); err != nil {
		t.Fatal(err)
	}
}

// updatesOK reads operations_total{op="update",result="ok"} of the
// reconciler "routes" of module from g.
func updatesOK(t *testing.T, g prometheus.Gatherer, module string) (float64, bool) {
	t.Helper()
	v, ok := sampleValues(t, g)[prefix+"operations_total{"+module+",routes,update,ok}"]
	return v, ok
}

// TestCell is the one-line setup: metrics.Cell in the hive, and the
// reconciler's metrics appear on the registry the cell provides, and
// nowhere global.
func TestCell(t *testing.T) {
	var reg *prometheus.Registry
	a := newApp(t, "app-cell", metrics.Cell, cell.Invoke(func(r *prometheus.Registry) { reg = r }))
	a.reconcile(t, "a", "b", "c")

	if v, ok := updatesOK(t, reg, "app-cell"); v != 3 {
		t.Errorf("operations_total{update,ok} = %v (present: %v), want 3", v, ok)
	}
	if _, ok := updatesOK(t, prometheus.DefaultGatherer, "app-cell"); ok {
		t.Error("metrics.Cell registered into the default registry")
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestCellProvidesInterface checks that the cell provides
// reconciler.Metrics, the interface: a concrete provider would leave
// Params.DefaultMetrics empty without an error.
func TestCellProvidesInterface(t *testing.T) {
	var m reconciler.Metrics
	h := hive.New(metrics.Cell, cell.Invoke(func(dm reconciler.Metrics) { m = dm }))
	if err := h.Populate(hivetest.Logger(t)); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.(*metrics.Prometheus); !ok {
		t.Errorf("reconciler.Metrics is %T, want *metrics.Prometheus", m)
	}
}

func TestCellWithRegistry(t *testing.T) {
	mine := prometheus.NewRegistry()
	var provided *prometheus.Registry
	a := newApp(t, "app-mine", metrics.NewCell(metrics.WithRegistry(mine)),
		cell.Invoke(func(r *prometheus.Registry) { provided = r }))
	a.reconcile(t, "a")
	if provided != mine {
		t.Error("the cell did not provide the given registry")
	}
	if v, _ := updatesOK(t, mine, "app-mine"); v != 1 {
		t.Errorf("operations_total{update,ok} = %v, want 1", v)
	}
}

func TestCellDefaultRegistry(t *testing.T) {
	// The default registry outlives the test: with -count=2 the series of
	// the first run are still there (and shared), so count the increase.
	before, _ := updatesOK(t, prometheus.DefaultGatherer, "app-default")
	a := newApp(t, "app-default", metrics.NewCell(metrics.WithDefaultRegistry()))
	a.reconcile(t, "a")
	if v, _ := updatesOK(t, prometheus.DefaultGatherer, "app-default"); v-before != 1 {
		t.Errorf("operations_total{update,ok} in the default registry rose by %v, want 1", v-before)
	}
}

func TestCellDefaultRegistryReplaced(t *testing.T) {
	saved := prometheus.DefaultRegisterer
	prometheus.DefaultRegisterer = prometheus.WrapRegistererWithPrefix("x_", saved)
	defer func() { prometheus.DefaultRegisterer = saved }()
	h := hive.New(metrics.NewCell(metrics.WithDefaultRegistry()), cell.Invoke(func(reconciler.Metrics) {}))
	if err := h.Populate(hivetest.Logger(t)); !errors.Is(err, metrics.ErrNotRegistry) {
		t.Errorf("Populate: %v, want ErrNotRegistry", err)
	}
}

func TestExpVarCell(t *testing.T) {
	a := newApp(t, "app-expvar", metrics.ExpVarCell)
	a.reconcile(t, "a", "b")
	v, _ := lookup(expvarTree(t, expvar.Get(metrics.ExpVarName)), "app-expvar/routes", "operations_total", "update", "ok")
	if v != 2.0 {
		t.Errorf("expvar operations_total.update.ok = %v, want 2", v)
	}
}
