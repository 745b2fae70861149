package k8ssource_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-go/converge/k8s/k8ssource"
	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
)

// startTwoSources starts one reconciler over one table fed by two
// Kubernetes sources, "a" of ca and "b" of cb, both with status, each
// with the transform given.
func startTwoSources(t *testing.T, ca, cb *crd, ta, tb func(*unstructured.Unstructured) ([]*obj, error)) *agent {
	t.Helper()
	a := &agent{t: t, target: newTarget(), log: hivetest.Logger(t, hivetest.LogLevel(slog.LevelError))}
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
				if err := a.startReconciler(a.target, rp); err != nil {
					return err
				}
				if a.src, err = newSource(ca, a.table, agentOpts{name: "a", transform: ta, statusInterval: 1}, p, a.rec); err != nil {
					return err
				}
				_, err = newSource(cb, a.table, agentOpts{name: "b", transform: tb, statusInterval: 1}, p, a.rec)
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

// resourceKeyed is transform with rows keyed by ResourceKey: they name
// the resource.
func resourceKeyed(c *crd) func(*unstructured.Unstructured) ([]*obj, error) {
	return func(u *unstructured.Unstructured) ([]*obj, error) {
		objs, err := transform(u)
		for _, o := range objs {
			o.Key = k8ssource.ResourceKey(c.gvr.GroupResource(), u)
		}
		return objs, err
	}
}

// Two resources feed one table, and each has an object ns/x: with keys
// that name the resource (ResourceKey) neither is refused, each gets
// its condition, and the target gets both.
func TestTwoResourcesOneTable(t *testing.T) {
	ca, cb := newCRD(t, cached), newCRD(t, cached)
	a := startTwoSources(t, ca, cb, resourceKeyed(ca), resourceKeyed(cb))
	ca.create(t, "ns", "x", "from-a")
	cb.create(t, "ns", "x", "from-b")
	ca.waitCondition(t, "ns", "x", metav1.ConditionTrue, "Reconciled")
	cb.waitCondition(t, "ns", "x", metav1.ConditionTrue, "Reconciled")
	want := map[string]string{
		ca.gvr.GroupResource().String() + "/ns/x": "from-a",
		cb.gvr.GroupResource().String() + "/ns/x": "from-b",
	}
	if got := a.settle(); !equalMaps(got, want) {
		t.Fatalf("target %v, want %v", got, want)
	}
}

// A status writer reads only the rows its own resource produced: with
// keys that collide (namespace/name alone), the row of ns/y is the first
// resource's, the second's is refused, and the second's object must not
// read the first's row as its own: its condition says it is not
// reconciled, never True.
func TestConditionOnlyFromOwnRows(t *testing.T) {
	ca, cb := newCRD(t, cached), newCRD(t, cached)
	a := startTwoSources(t, ca, cb, transform, transform)
	ca.create(t, "ns", "y", "from-a")
	ca.waitCondition(t, "ns", "y", metav1.ConditionTrue, "Reconciled")
	a.waitDone(map[string]string{"ns/y": "from-a"})
	cb.create(t, "ns", "y", "from-b")
	u := cb.waitObject(t, "ns", "y", func(u *unstructured.Unstructured) bool { _, ok := reconciled(u); return ok })
	if cond, _ := reconciled(u); cond.Status != metav1.ConditionFalse || cond.Reason != k8ssource.ReasonReconciling {
		t.Fatalf("b's ns/y: condition %+v from a row that is not its own", cond)
	}
	if got := a.settle(); !equalMaps(got, map[string]string{"ns/y": "from-a"}) {
		t.Fatalf("target %v", got)
	}
}
