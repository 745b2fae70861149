package k8ssource_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-go/converge/k8s/k8ssource"
)

const testFinalizer = "test.converge.dev/cleanup"

func finalized(u *unstructured.Unstructured) bool {
	return slices.Contains(u.GetFinalizers(), testFinalizer)
}

// waitGone watches ns/name until it is deleted for good.
func (c *crd) waitGone(t *testing.T, ns, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	r := c.dyn.Resource(c.gvr).Namespace(ns)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	l, err := r.List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) == 0 {
		return
	}
	w, err := r.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: l.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Deleted {
			return
		}
	}
	if _, err := r.Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("%s/%s is still there: %v", ns, name, err)
	}
}

// With a finalizer, a deleted object stays Terminating while the Delete
// of its table object fails, its condition False/CleanupFailed with the
// error and a Warning Event saying so; once the Delete succeeds the
// finalizer goes, and so does the object. The target keeps its entry
// until then.
func TestFinalizerHoldsUntilDeleteSucceeds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := cached.InstallEvents(ctx); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cached.Config())
	if err != nil {
		t.Fatal(err)
	}
	c := newCRD(t, cached)
	ns := c.gvr.Resource // a namespace of its own: Events outlive the test
	tg := newTarget()
	a := startAgent(t, c, tg, agentOpts{statusInterval: 1, finalizer: testFinalizer,
		status: func(s *k8ssource.StatusConfig[*unstructured.Unstructured, *obj]) { s.Events = cs.EventsV1() }})
	c.create(t, ns, "x", "v")
	c.waitObject(t, ns, "x", finalized)
	c.waitCondition(t, ns, "x", metav1.ConditionTrue, "Reconciled")

	tg.setDeleteFail(ns+"/x", errors.New("device busy"))
	c.delete(t, ns, "x")
	cond := c.waitCondition(t, ns, "x", metav1.ConditionFalse, k8ssource.ReasonCleanupFailed)
	if !strings.Contains(cond.Message, "device busy") {
		t.Fatalf("condition %+v", cond)
	}
	a.waitDone(map[string]string{})
	if got := tg.snapshot(); got[ns+"/x"] != "v" {
		t.Fatalf("target %v: the entry went although its Delete failed", got)
	}
	u := c.waitObject(t, ns, "x", func(u *unstructured.Unstructured) bool { return u.GetDeletionTimestamp() != nil })
	if !finalized(u) {
		t.Fatal("the finalizer went while the Delete fails")
	}
	if e := waitEvent(t, cs, ns, "x", k8ssource.ReasonCleanupFailed); e.Reason != k8ssource.ReasonCleanupFailed || e.Type != "Warning" || !strings.Contains(e.Note, "device busy") {
		t.Fatalf("event %+v", e)
	}

	tg.setDeleteFail(ns+"/x", nil)
	c.waitGone(t, ns, "x")
	if got := tg.snapshot(); len(got) != 0 {
		t.Fatalf("target %v", got)
	}
}

// An object deleted while no agent runs stays Terminating; the agent,
// started, finishes it the same way: its Delete runs (and no Update),
// then the finalizer goes.
func TestFinalizerAfterRestart(t *testing.T) {
	c := newCRD(t, cached)
	tg := newTarget()
	a := startAgent(t, c, tg, agentOpts{statusInterval: 1, finalizer: testFinalizer})
	c.create(t, "fin", "y", "v")
	c.waitObject(t, "fin", "y", finalized)
	c.waitCondition(t, "fin", "y", metav1.ConditionTrue, "Reconciled")
	a.stop()

	c.delete(t, "fin", "y")
	c.waitObject(t, "fin", "y", func(u *unstructured.Unstructured) bool { return u.GetDeletionTimestamp() != nil })
	updates := tg.updateCount("fin/y")
	startAgent(t, c, tg, agentOpts{statusInterval: 1, finalizer: testFinalizer})
	c.waitGone(t, "fin", "y")
	if got := tg.snapshot(); len(got) != 0 {
		t.Fatalf("target %v", got)
	}
	if n := tg.updateCount("fin/y"); n != updates {
		t.Fatalf("%d Updates of the deleted object after the restart", n-updates)
	}
}

// An object that never yielded rows is released at once.
func TestFinalizerNothingToClean(t *testing.T) {
	c := newCRD(t, cached)
	startAgent(t, c, newTarget(), agentOpts{statusInterval: 1, finalizer: testFinalizer})
	c.create(t, "fin", "z", "none")
	c.waitObject(t, "fin", "z", finalized)
	c.delete(t, "fin", "z")
	c.waitGone(t, "fin", "z")
}
