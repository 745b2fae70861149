package k8ssource_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/converge-go/converge/reconciler"
)

const waitLimit = time.Minute

// waitTable waits, on table changes, until cond holds.
func (a *agent) waitTable(what string, cond func(txn statedb.ReadTxn) bool) {
	a.t.Helper()
	deadline := time.After(waitLimit)
	for {
		txn := a.db.ReadTxn()
		_, watch := a.table.AllWatch(txn)
		initialized, initWatch := a.table.Initialized(txn)
		if initialized {
			initWatch = nil // closed: it would spin
		}
		if cond(txn) {
			return
		}
		select {
		case <-watch:
		case <-initWatch:
		case <-deadline:
			a.t.Fatalf("timed out waiting for %s; source %+v", what, a.src.Status())
		}
	}
}

// rows returns key -> value of the table's objects, and whether all are
// Done.
func (a *agent) rows(txn statedb.ReadTxn) (map[string]string, bool) {
	m := map[string]string{}
	done := true
	for o := range a.table.All(txn) {
		m[o.Key] = o.Value
		done = done && o.Status.Kind == reconciler.StatusKindDone
	}
	return m, done
}

// waitDone waits until the table holds exactly want, every object Done.
func (a *agent) waitDone(want map[string]string) {
	a.t.Helper()
	a.waitTable(fmt.Sprintf("%d objects done", len(want)), func(txn statedb.ReadTxn) bool {
		got, done := a.rows(txn)
		return done && equalMaps(got, want)
	})
}

// settle waits until the reconciler has acted on every change of the
// table so far (deletes included), and returns the target's state.
func (a *agent) settle() map[string]string {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	rev := a.table.Revision(a.db.ReadTxn())
	if _, _, err := a.rec.WaitUntilReconciled(ctx, rev); err != nil {
		a.t.Fatal(err)
	}
	return a.target.snapshot()
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// jobHealth returns the health of the job named job ("k8s-status-k8s",
// "source-k8s") as last reported.
func (a *agent) jobHealth(job string) (cell.Level, string, error) {
	h := a.health.GetChild("job-" + job)
	if h == nil {
		return "", "", nil
	}
	h.Lock()
	defer h.Unlock()
	return h.Level, h.Status, h.Error
}

// waitHealth polls (every 5 ms, for at most a minute: health has no
// change notification) until the job's health satisfies cond.
func (a *agent) waitHealth(job string, cond func(cell.Level, string, error) bool) {
	a.t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(waitLimit)
	for {
		l, s, err := a.jobHealth(job)
		if cond(l, s, err) {
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("health of %s never matched: %s %q %v", job, l, s, err)
		}
		<-tick.C
	}
}

func (c *crd) object(ns, name, value string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": c.apiVersion, "kind": c.kind,
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     map[string]any{"value": value},
	}}
}

func (c *crd) create(t testing.TB, ns, name, value string) *unstructured.Unstructured {
	t.Helper()
	u, err := c.dyn.Resource(c.gvr).Namespace(ns).Create(context.Background(), c.object(ns, name, value), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// setValue changes spec.value (a new generation) and returns the object.
func (c *crd) setValue(t testing.TB, ns, name, value string) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	r := c.dyn.Resource(c.gvr).Namespace(ns)
	for {
		u, err := r.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(u.Object, value, "spec", "value"); err != nil {
			t.Fatal(err)
		}
		u, err = r.Update(ctx, u, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue // the status writer wrote meanwhile
		}
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
}

func (c *crd) delete(t testing.TB, ns, name string) {
	t.Helper()
	if err := c.dyn.Resource(c.gvr).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// reconciled is the Reconciled condition of u, if any.
func reconciled(u *unstructured.Unstructured) (metav1.Condition, bool) {
	return conditionOfType(u, "Reconciled")
}

// conditionOfType is the condition of type typ of u, if any.
func conditionOfType(u *unstructured.Unstructured, typ string) (metav1.Condition, bool) {
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, e := range list {
		m, _ := e.(map[string]any)
		if m["type"] != typ {
			continue
		}
		var c metav1.Condition
		c.Type = typ
		s, _ := m["status"].(string)
		c.Status = metav1.ConditionStatus(s)
		c.Reason, _ = m["reason"].(string)
		c.Message, _ = m["message"].(string)
		c.ObservedGeneration, _ = m["observedGeneration"].(int64)
		return c, true
	}
	return metav1.Condition{}, false
}

// waitObject watches the object ns/name until cond holds for it, for at
// most a minute, and returns it.
func (c *crd) waitObject(t testing.TB, ns, name string, cond func(u *unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	r := c.dyn.Resource(c.gvr).Namespace(ns)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	var last *unstructured.Unstructured
	for ctx.Err() == nil {
		l, err := r.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			pause(ctx) // the server may be restarting; the deadline bounds this
			continue
		}
		for i := range l.Items {
			if last = &l.Items[i]; cond(last) {
				return last
			}
		}
		w, err := r.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: l.GetResourceVersion()})
		if err != nil {
			pause(ctx)
			continue
		}
		for ev := range w.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != watch.Error && ev.Type != watch.Bookmark {
				if last = u; cond(u) {
					w.Stop()
					return u
				}
			}
		}
		w.Stop()
	}
	t.Fatalf("%s/%s never matched; last %v", ns, name, last)
	return nil
}

// waitCondition waits until ns/name has a Reconciled condition of status
// and reason for its current generation, and returns it.
func (c *crd) waitCondition(t testing.TB, ns, name string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	return c.waitConditionType(t, ns, name, "Reconciled", status, reason)
}

// waitConditionType is waitCondition for the condition of type typ.
func (c *crd) waitConditionType(t testing.TB, ns, name, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	c.waitObject(t, ns, name, func(u *unstructured.Unstructured) bool {
		cond, ok := conditionOfType(u, typ)
		got = cond
		return ok && cond.Status == status && cond.Reason == reason && cond.ObservedGeneration == u.GetGeneration()
	})
	return got
}

// pause is the retry delay of a failed request in a wait loop.
func pause(ctx context.Context) {
	t := time.NewTimer(20 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
