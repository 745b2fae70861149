package k8ssource_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-go/converge/k8s/apiservertest"
	"github.com/converge-go/converge/reconciler"
)

// statusPatch reports whether req writes the status of the object name.
func statusPatch(req *http.Request, name string) bool {
	return req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/"+name+"/status")
}

// A spec that Transform rejects keeps the object's former table objects
// (and target state), and its condition says why, for that generation;
// a failing operation is reported the same way; both recover.
func TestTransformAndReconcileFailures(t *testing.T) {
	c := newCRD(t, cached)
	tg := newTarget()
	c.create(t, "ns", "x", "v1")
	a := startAgent(t, c, tg, agentOpts{statusInterval: 1})
	a.waitDone(map[string]string{"ns/x": "v1"})
	c.waitCondition(t, "ns", "x", metav1.ConditionTrue, "Reconciled")

	c.setValue(t, "ns", "x", "bad-1")
	cond := c.waitCondition(t, "ns", "x", metav1.ConditionFalse, "TransformFailed")
	if !strings.Contains(cond.Message, errBadSpec.Error()) || cond.ObservedGeneration != 2 {
		t.Fatalf("condition %+v", cond)
	}
	if got, done := a.rows(a.db.ReadTxn()); !done || !equalMaps(got, map[string]string{"ns/x": "v1"}) {
		t.Fatalf("table %v (done %v): the failing object must keep its objects", got, done)
	}
	if got := tg.snapshot(); !equalMaps(got, map[string]string{"ns/x": "v1"}) {
		t.Fatalf("target %v", got)
	}
	a.waitHealth("source-k8s", func(l cell.Level, _ string, err error) bool {
		return l == cell.StatusDegraded && err != nil && strings.Contains(err.Error(), "ns/x")
	})

	c.setValue(t, "ns", "x", "v3")
	a.waitDone(map[string]string{"ns/x": "v3"})
	if cond := c.waitCondition(t, "ns", "x", metav1.ConditionTrue, "Reconciled"); cond.ObservedGeneration != 3 {
		t.Fatalf("condition %+v", cond)
	}

	tg.setFail("ns/y", errors.New("disk full"))
	c.create(t, "ns", "y", "v")
	if cond := c.waitCondition(t, "ns", "y", metav1.ConditionFalse, "ReconcileFailed"); !strings.Contains(cond.Message, "disk full") {
		t.Fatalf("condition %+v", cond)
	}
	tg.setFail("ns/y", nil)
	c.waitCondition(t, "ns", "y", metav1.ConditionTrue, "Reconciled")
}

// Conflicting status writes are retried without degrading health; a
// condition another writer changes is restored, and that writer's own
// condition is left alone.
func TestStatusConflicts(t *testing.T) {
	c := newCRD(t, cached)
	var conflicts atomic.Int64
	cached.Inject(func(req *http.Request) *metav1.Status {
		if statusPatch(req, "z") && conflicts.Add(1) <= 3 {
			return apiservertest.Status(http.StatusConflict, metav1.StatusReasonConflict, "the object has been modified")
		}
		return nil
	})
	defer cached.Inject(nil)
	a := startAgent(t, c, newTarget(), agentOpts{statusInterval: 1})
	c.create(t, "ns", "z", "v")
	c.waitCondition(t, "ns", "z", metav1.ConditionTrue, "Reconciled")
	if n := conflicts.Load(); n < 4 {
		t.Fatalf("%d status writes, want the 3 conflicts and a success", n)
	}
	if l, s, err := a.jobHealth("k8s-status-k8s"); l != cell.StatusOK {
		t.Fatalf("health after conflicts: %s %q %v", l, s, err)
	}

	// Another manager sets Reconciled=False and a condition of its own.
	r := c.dyn.Resource(c.gvr).Namespace("ns")
	for {
		u, err := r.Get(context.Background(), "z", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conds := []any{
			map[string]any{"type": "Reconciled", "status": "False", "reason": "Manual", "message": "edited", "lastTransitionTime": "2020-01-01T00:00:00Z"},
			map[string]any{"type": "Ready", "status": "True", "reason": "Other", "message": "", "lastTransitionTime": "2020-01-01T00:00:00Z"},
		}
		if err := unstructured.SetNestedSlice(u.Object, conds, "status", "conditions"); err != nil {
			t.Fatal(err)
		}
		if _, err = r.UpdateStatus(context.Background(), u, metav1.UpdateOptions{FieldManager: "someone-else"}); err == nil {
			break
		}
	}
	u := c.waitObject(t, "ns", "z", func(u *unstructured.Unstructured) bool {
		cond, ok := reconciled(u)
		return ok && cond.Status == metav1.ConditionTrue
	})
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	ready := false
	for _, e := range conds {
		ready = ready || e.(map[string]any)["type"] == "Ready"
	}
	if !ready {
		t.Fatalf("the other manager's condition is gone: %v", conds)
	}
}

// A status write answered 404 (the object deleted under the write) is
// forgotten quietly, without a health error; the object's next change is
// written.
func TestStatusNotFound(t *testing.T) {
	c := newCRD(t, cached)
	defer cached.Inject(nil)
	a := startAgent(t, c, newTarget(), agentOpts{statusInterval: 1})
	var notFound atomic.Int64
	answered := make(chan struct{})
	cached.Inject(func(req *http.Request) *metav1.Status {
		if statusPatch(req, "g") && notFound.Add(1) == 1 {
			defer close(answered)
			return apiservertest.Status(http.StatusNotFound, metav1.StatusReasonNotFound, "not found")
		}
		return nil
	})
	c.create(t, "ns", "g", "v")
	select {
	case <-answered:
	case <-time.After(waitLimit):
		t.Fatal("no status write of g")
	}
	c.setValue(t, "ns", "g", "v2")
	c.waitCondition(t, "ns", "g", metav1.ConditionTrue, "Reconciled")
	if n := notFound.Load(); n < 2 {
		t.Fatalf("%d status writes of g, want the 404 and a success", n)
	}
	if l, s, err := a.jobHealth("k8s-status-k8s"); l != cell.StatusOK {
		t.Fatalf("health after a 404: %s %q %v", l, s, err)
	}
}

// A forbidden status write is the status job's health error, naming the
// resource and the object, until the write is allowed.
func TestStatusForbidden(t *testing.T) {
	c := newCRD(t, cached)
	cached.Inject(func(req *http.Request) *metav1.Status {
		if statusPatch(req, "f") {
			return apiservertest.Status(http.StatusForbidden, metav1.StatusReasonForbidden, `user "agent" cannot patch resource "`+c.gvr.Resource+`/status"`)
		}
		return nil
	})
	defer cached.Inject(nil)
	a := startAgent(t, c, newTarget(), agentOpts{statusInterval: 1})
	c.create(t, "ns", "f", "v")
	want := c.gvr.GroupResource().String() + " ns/f forbidden"
	a.waitHealth("k8s-status-k8s", func(l cell.Level, _ string, err error) bool {
		return l == cell.StatusDegraded && err != nil && strings.Contains(err.Error(), want)
	})
	cached.Inject(nil)
	c.waitCondition(t, "ns", "f", metav1.ConditionTrue, "Reconciled")
	a.waitHealth("k8s-status-k8s", func(l cell.Level, _ string, _ error) bool { return l == cell.StatusOK })
}

// Only the replica that owns a key writes its status; a key gained is
// written when ownership changes.
func TestStatusOnlyOwnerWrites(t *testing.T) {
	c := newCRD(t, cached)
	var patches atomic.Int64
	cached.Inject(func(req *http.Request) *metav1.Status {
		if statusPatch(req, "o") {
			patches.Add(1)
		}
		return nil
	})
	defer cached.Inject(nil)
	var (
		owned     atomic.Bool
		ap        atomic.Pointer[agent]
		declined  = make(chan struct{})
		closeOnce sync.Once
		changed   = make(chan struct{})
	)
	owns := func(key string) bool {
		if owned.Load() {
			return true
		}
		// The writer asks right before it would write: once it has asked
		// about the object reconciled, it has declined to write it.
		a := ap.Load()
		if a == nil {
			return false
		}
		if o, _, ok := a.table.Get(a.db.ReadTxn(), keyIndex.Query(key)); ok && o.Status.Kind == reconciler.StatusKindDone {
			closeOnce.Do(func() { close(declined) })
		}
		return false
	}
	// One change of ownership: after it, the channel is nil (never).
	ownsChanged := func() <-chan struct{} {
		if owned.Load() {
			return nil
		}
		return changed
	}
	a := startAgentOwned(t, c, owns, ownsChanged)
	ap.Store(a)
	c.create(t, "ns", "o", "v")
	a.waitDone(map[string]string{"ns/o": "v"})
	<-declined
	if n := patches.Load(); n != 0 {
		t.Fatalf("%d status writes by a replica that does not own the key", n)
	}
	owned.Store(true)
	close(changed)
	c.waitCondition(t, "ns", "o", metav1.ConditionTrue, "Reconciled")
}
