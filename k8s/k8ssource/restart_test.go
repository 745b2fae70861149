package k8ssource_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-go/converge/k8s/apiservertest"
	"github.com/converge-go/converge/source"
)

// 10,000 objects present when the agent starts all reach the table in
// its first list.
func TestTenThousandAtStart(t *testing.T) {
	c := newCRD(t, cached)
	const n = 10000
	objs := make([]*unstructured.Unstructured, n)
	want := make(map[string]string, n)
	for i := range objs {
		name := fmt.Sprintf("o%05d", i)
		objs[i] = c.object("bulk", name, fmt.Sprint(i))
		want["bulk/"+name] = fmt.Sprint(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cached.PutRaw(ctx, c.gvr, objs); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, c, newTarget(), agentOpts{noStatus: true})
	a.waitDone(want)
	if st := a.src.Status(); st.Relists != 1 || st.Items != n {
		t.Fatalf("status %+v: want one list of %d items", st, n)
	}
}

// A watch whose resourceVersion etcd has compacted away ends in 410 Gone:
// the source lists again, and the relist deletes what was deleted while
// it was not watching. The API server is restarted after the compaction,
// as after an upgrade: otherwise its watch cache would still serve the
// old resourceVersion from memory.
func TestExpiredWatchRelists(t *testing.T) {
	c := newCRD(t, cached)
	c.create(t, "ns", "keep", "k")
	c.create(t, "ns", "gone", "g")
	a := startAgent(t, c, newTarget(), agentOpts{noStatus: true})
	a.waitDone(map[string]string{"ns/keep": "k", "ns/gone": "g"})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := cached.WaitWatches(ctx, 1); err != nil {
		t.Fatal(err)
	}

	// Cut the source's watch and refuse its new ones while objects
	// change and etcd compacts past the source's resourceVersion.
	cached.Inject(func(req *http.Request) *metav1.Status {
		if req.URL.Query().Get("watch") == "true" && strings.Contains(req.URL.Path, c.gvr.Resource) {
			return apiservertest.Status(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "cut")
		}
		return nil
	})
	defer cached.Inject(nil)
	cached.CutWatches()
	c.delete(t, "ns", "gone")
	c.create(t, "ns", "new", "n")
	if _, err := cached.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	cached.StopAPI()
	if err := cached.StartAPI(); err != nil {
		t.Fatal(err)
	}
	cached.Inject(nil)
	a.waitDone(map[string]string{"ns/keep": "k", "ns/new": "n"})
	if st := a.src.Status(); st.LastRelist.Reason != source.ReasonExpired || st.Relists != 2 {
		t.Fatalf("status %+v: want a second list, for an expired resourceVersion", st)
	}
}

// The API server stops while the agent watches; objects change in etcd
// meanwhile; when it is back, the source catches up and its health turns
// OK again.
func TestAPIServerRestart(t *testing.T) {
	c := newCRD(t, cached)
	c.create(t, "ns", "a", "1")
	c.create(t, "ns", "b", "1")
	a := startAgent(t, c, newTarget(), agentOpts{statusInterval: 1})
	a.waitDone(map[string]string{"ns/a": "1", "ns/b": "1"})
	c.waitCondition(t, "ns", "b", metav1.ConditionTrue, "Reconciled")

	cached.StopAPI()
	ctx := context.Background()
	if err := cached.DeleteRaw(ctx, c.gvr, "ns", "b"); err != nil {
		t.Fatal(err)
	}
	if err := cached.PutRaw(ctx, c.gvr, []*unstructured.Unstructured{c.object("ns", "c", "1")}); err != nil {
		t.Fatal(err)
	}
	a.waitHealth("source-k8s", func(l cell.Level, _ string, _ error) bool { return l == cell.StatusDegraded })
	if err := cached.StartAPI(); err != nil {
		t.Fatal(err)
	}
	a.waitDone(map[string]string{"ns/a": "1", "ns/c": "1"})
	c.waitCondition(t, "ns", "c", metav1.ConditionTrue, "Reconciled")
	a.waitHealth("source-k8s", func(l cell.Level, _ string, _ error) bool { return l == cell.StatusOK })
}

// An agent restarted while one of its objects fails Transform prunes
// nothing that object yielded before: the table is not initialized until
// every listed object has been read once (the source layer's rule), so
// the reconciler does not prune. The good objects are reconciled
// meanwhile, and the failing one's condition says why.
func TestRestartWithFailingObjectPrunesNothing(t *testing.T) {
	c := newCRD(t, cached)
	tg := newTarget()
	c.create(t, "ns", "good", "g")
	c.create(t, "ns", "flaky", "f1")
	a := startAgent(t, c, tg, agentOpts{statusInterval: 1})
	a.waitDone(map[string]string{"ns/good": "g", "ns/flaky": "f1"})
	a.stop()

	c.setValue(t, "ns", "flaky", "bad-2")
	c.setValue(t, "ns", "good", "g2")
	a = startAgent(t, c, tg, agentOpts{statusInterval: 1})
	c.waitCondition(t, "ns", "flaky", metav1.ConditionFalse, "TransformFailed")
	a.waitDone(map[string]string{"ns/good": "g2"})
	if init, _ := a.table.Initialized(a.db.ReadTxn()); init {
		t.Fatal("table initialized while a listed object has never been read")
	}
	if got := tg.snapshot(); !equalMaps(got, map[string]string{"ns/good": "g2", "ns/flaky": "f1"}) {
		t.Fatalf("target %v: the failing object's file must stay", got)
	}

	c.setValue(t, "ns", "flaky", "f3")
	a.waitDone(map[string]string{"ns/good": "g2", "ns/flaky": "f3"})
	c.waitCondition(t, "ns", "flaky", metav1.ConditionTrue, "Reconciled")
	a.waitTable("initialized", func(txn statedb.ReadTxn) bool { init, _ := a.table.Initialized(txn); return init })
	if got := tg.snapshot(); !equalMaps(got, map[string]string{"ns/good": "g2", "ns/flaky": "f3"}) {
		t.Fatalf("target %v", got)
	}
}
