package k8ssource_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-go/converge/k8s/k8ssource"
)

// A primary whose spec.value is "secret:<name>" reads the object <name>
// of the secondary resource (a Secret's stand-in: the test server serves
// no core group, so a custom resource plays it, its spec.value the
// credential). A change of the secondary object reaches the target: the
// primary is read again from what the source last saw of it, with no
// request, and its row written with the new value; so does its
// creation after the primary (the read missed) and its deletion.
func TestSecondaryChangeReachesTarget(t *testing.T) {
	primary, secrets := newCRD(t, cached), newCRD(t, cached)
	sec := k8ssource.NewSecondary("secrets", k8ssource.Dynamic(secrets.dyn.Resource(secrets.gvr), ""), k8ssource.ListerWatcherOptions{})
	tf := func(u *unstructured.Unstructured) ([]*obj, error) {
		v, _, _ := unstructured.NestedString(u.Object, "spec", "value")
		name, ok := strings.CutPrefix(v, "secret:")
		if !ok {
			return transform(u)
		}
		val := "missing"
		if s, found := sec.Get(u, u.GetNamespace(), name); found {
			val, _, _ = unstructured.NestedString(s.Object, "spec", "value")
		}
		return []*obj{{Key: k8ssource.Key(u), Item: k8ssource.Key(u), Value: "password=" + val, Gen: u.GetGeneration()}}, nil
	}
	secrets.create(t, "ns", "db", "hunter2")
	a := startAgent(t, primary, newTarget(), agentOpts{statusInterval: 1, transform: tf, secondaries: []k8ssource.SecondaryResource{sec}})
	primary.create(t, "ns", "app", "secret:db")
	a.waitDone(map[string]string{"ns/app": "password=hunter2"})

	secrets.setValue(t, "ns", "db", "correct-horse")
	a.waitDone(map[string]string{"ns/app": "password=correct-horse"})

	primary.create(t, "ns", "later", "secret:later")
	a.waitDone(map[string]string{"ns/app": "password=correct-horse", "ns/later": "password=missing"})
	secrets.create(t, "ns", "later", "s3cret")
	a.waitDone(map[string]string{"ns/app": "password=correct-horse", "ns/later": "password=s3cret"})

	secrets.delete(t, "ns", "db")
	a.waitDone(map[string]string{"ns/app": "password=missing", "ns/later": "password=s3cret"})
	if got := a.target.snapshot(); got["ns/app"] != "password=missing" || got["ns/later"] != "password=s3cret" {
		t.Fatalf("target %v", got)
	}
}
