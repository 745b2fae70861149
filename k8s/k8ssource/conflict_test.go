package k8ssource_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/converge-go/converge/k8s/k8ssource"
)

// providerKeyed keys the row by the provider's own name, the part of
// spec.value before '=' (as a DNS operator keys by FQDN): two objects
// can ask for one key.
func providerKeyed(u *unstructured.Unstructured) ([]*obj, error) {
	v, _, _ := unstructured.NestedString(u.Object, "spec", "value")
	name, _, _ := strings.Cut(v, "=")
	return []*obj{{Key: "fqdn/" + name, Item: k8ssource.Key(u), Value: v, Gen: u.GetGeneration()}}, nil
}

// Two objects ask for one key: the first holds it; the second says so on
// itself (Ready=False, Conflict, naming the holder; kstatus Failed) and
// never reaches the target. Deleting the holder completes once its own
// Delete succeeded (while it fails the other stays refused); then the
// other object holds the key, and its row is written.
func TestConflictShownOnObject(t *testing.T) {
	c := newCRD(t, cached)
	tg := newTarget()
	cs := fake.NewClientset()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	events, err := cs.EventsV1().Events("ns").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer events.Stop()
	startAgent(t, c, tg, agentOpts{statusInterval: 1, transform: providerKeyed, finalizer: testFinalizer,
		status: func(s *k8ssource.StatusConfig[*unstructured.Unstructured, *obj]) {
			kstatusConfig(s)
			s.Events = cs.EventsV1()
		}})
	c.create(t, "ns", "a", "www=A")
	c.waitConditionType(t, "ns", "a", "Ready", metav1.ConditionTrue, k8ssource.ReasonReconciled)
	c.create(t, "ns", "b", "www=B")
	cond := c.waitConditionType(t, "ns", "b", "Ready", metav1.ConditionFalse, k8ssource.ReasonConflict)
	if !strings.Contains(cond.Message, "ns/a") || !strings.Contains(cond.Message, `"fqdn/www"`) {
		t.Fatalf("b's message %q does not name the key and its holder", cond.Message)
	}
	b := c.waitObject(t, "ns", "b", func(u *unstructured.Unstructured) bool {
		res, err := status.Compute(u)
		return err == nil && res.Status == status.FailedStatus
	})
	if st, ok := conditionOfType(b, "Stalled"); !ok || st.Reason != k8ssource.ReasonConflict {
		t.Fatalf("b's Stalled %+v", st)
	}
	if got := tg.snapshot(); got["fqdn/www"] != "www=A" {
		t.Fatalf("target %v", got)
	}
	var bEvent *eventsv1.Event
	for ev := range events.ResultChan() {
		if e, ok := ev.Object.(*eventsv1.Event); ok && e.Regarding.Name == "b" {
			bEvent = e
			break
		}
	}
	if bEvent == nil || bEvent.Type != "Warning" || bEvent.Reason != k8ssource.ReasonConflict {
		t.Fatalf("b's Event %+v, want a Warning Conflict", bEvent)
	}

	// The holder goes; its Delete fails first: it stays, and b waits.
	tg.setDeleteFail("fqdn/www", errors.New("provider down"))
	c.delete(t, "ns", "a")
	c.waitConditionType(t, "ns", "a", "Ready", metav1.ConditionFalse, k8ssource.ReasonCleanupFailed)
	u := c.waitObject(t, "ns", "b", func(*unstructured.Unstructured) bool { return true })
	if cond, _ := conditionOfType(u, "Ready"); cond.Reason != k8ssource.ReasonConflict {
		t.Fatalf("b took the key before a's Delete succeeded: %+v", cond)
	}
	tg.setDeleteFail("fqdn/www", nil)
	c.waitGone(t, "ns", "a")
	c.waitConditionType(t, "ns", "b", "Ready", metav1.ConditionTrue, k8ssource.ReasonReconciled)
	if got := tg.snapshot(); got["fqdn/www"] != "www=B" {
		t.Fatalf("target %v after a went", got)
	}
}

// Without a finalizer the key passes on as soon as the holder is gone;
// an object that stops asking for the key hands it over once its row
// left the table.
func TestConflictKeyPassesOn(t *testing.T) {
	c := newCRD(t, cached)
	tg := newTarget()
	startAgent(t, c, tg, agentOpts{statusInterval: 1, transform: providerKeyed})
	c.create(t, "ns", "a", "www=A")
	c.waitCondition(t, "ns", "a", metav1.ConditionTrue, k8ssource.ReasonReconciled)
	c.create(t, "ns", "b", "www=B")
	c.create(t, "ns", "c", "www=C")
	c.waitCondition(t, "ns", "b", metav1.ConditionFalse, k8ssource.ReasonConflict)
	c.waitCondition(t, "ns", "c", metav1.ConditionFalse, k8ssource.ReasonConflict)

	// a asks for another name: b asked next, and gets www.
	c.setValue(t, "ns", "a", "mail=A")
	c.waitCondition(t, "ns", "a", metav1.ConditionTrue, k8ssource.ReasonReconciled)
	c.waitCondition(t, "ns", "b", metav1.ConditionTrue, k8ssource.ReasonReconciled)
	c.waitObject(t, "ns", "c", func(u *unstructured.Unstructured) bool {
		cond, _ := reconciled(u)
		return cond.Reason == k8ssource.ReasonConflict && strings.Contains(cond.Message, "held by ns/b")
	})
	// b is deleted: c gets www.
	c.delete(t, "ns", "b")
	c.waitCondition(t, "ns", "c", metav1.ConditionTrue, k8ssource.ReasonReconciled)
	if got := tg.snapshot(); got["fqdn/www"] != "www=C" || got["fqdn/mail"] != "mail=A" {
		t.Fatalf("target %v", got)
	}
}

// A restart keeps the holder: the refused object, though it is read
// first (its name sorts first), holds no key before the first list is
// read, and the target never gets its value.
func TestConflictHolderKeptOverRestart(t *testing.T) {
	c := newCRD(t, cached)
	a := startAgent(t, c, newTarget(), agentOpts{statusInterval: 1, transform: providerKeyed})
	c.create(t, "ns", "z", "www=Z")
	c.waitCondition(t, "ns", "z", metav1.ConditionTrue, k8ssource.ReasonReconciled)
	c.create(t, "ns", "b", "www=B")
	c.waitCondition(t, "ns", "b", metav1.ConditionFalse, k8ssource.ReasonConflict)
	a.stop()

	tg := newTarget()
	a = startAgent(t, c, tg, agentOpts{statusInterval: 1, transform: providerKeyed})
	a.waitDone(map[string]string{"fqdn/www": "www=Z"})
	c.waitObject(t, "ns", "b", func(u *unstructured.Unstructured) bool {
		cond, _ := reconciled(u)
		return cond.Reason == k8ssource.ReasonConflict && strings.Contains(cond.Message, "held by ns/z")
	})
	if n := tg.updateCount("fqdn/www"); n != 1 {
		t.Fatalf("%d Updates of fqdn/www after the restart, want 1 (z's)", n)
	}
}
