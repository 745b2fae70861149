package k8ssource_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cilium/hive/cell"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-go/converge/k8s/k8ssource"
)

// A CRD without a status subresource is the status job's health error,
// naming the CRD and what to change, not "OK, 0 status writes".
func TestCRDWithoutStatusSubresource(t *testing.T) {
	c := newCRDWith(t, cached, func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Spec.Versions[0].Subresources = nil
	})
	c.create(t, "ns", "x", "v")
	a := startAgent(t, c, newTarget(), agentOpts{statusInterval: 1})
	a.waitDone(map[string]string{"ns/x": "v"})
	a.waitHealth("k8s-status-k8s", func(l cell.Level, _ string, err error) bool {
		return l == cell.StatusDegraded && errors.Is(err, k8ssource.ErrNoStatusSubresource) &&
			strings.Contains(err.Error(), c.gvr.GroupResource().String()) && strings.Contains(err.Error(), "subresources: {status: {}}")
	})
}

// A CRD whose status.conditions is not a map list keyed by type: nothing
// is written over the other managers' conditions, and health names the
// CRD and what to change. Once the CRD is fixed, the condition is
// written beside the others.
func TestCRDWithAtomicConditions(t *testing.T) {
	c := newCRDWith(t, cached, func(crd *apiextensionsv1.CustomResourceDefinition) {
		preserve := true
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties["conditions"] = apiextensionsv1.JSONSchemaProps{
			Type:  "array",
			Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}},
		}
	})
	c.create(t, "ns", "x", "v")
	r := c.dyn.Resource(c.gvr).Namespace("ns")
	u, err := r.Get(context.Background(), "x", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other := map[string]any{"type": "Healthy", "status": "True", "reason": "Probe", "message": "", "lastTransitionTime": "2020-01-01T00:00:00Z"}
	if err := unstructured.SetNestedSlice(u.Object, []any{other}, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.UpdateStatus(context.Background(), u, metav1.UpdateOptions{FieldManager: "prober"}); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, c, newTarget(), agentOpts{statusInterval: 1})
	a.waitDone(map[string]string{"ns/x": "v"})
	a.waitHealth("k8s-status-k8s", func(l cell.Level, _ string, err error) bool {
		return l == cell.StatusDegraded && errors.Is(err, k8ssource.ErrConditionsNotMapList) &&
			strings.Contains(err.Error(), c.gvr.GroupResource().String()) && strings.Contains(err.Error(), "x-kubernetes-list-map-keys: [type]")
	})
	if u, err = r.Get(context.Background(), "x", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := conditionOfType(u, "Healthy"); !ok {
		t.Fatalf("the other manager's condition is gone: %v", u.Object["status"])
	}
	if _, ok := reconciled(u); ok {
		t.Fatalf("written over an atomic list: %v", u.Object["status"])
	}

	// The CRD fixed: the writer checks again and writes.
	cs, err := clientset.NewForConfig(cached.Config())
	if err != nil {
		t.Fatal(err)
	}
	crds := cs.ApiextensionsV1().CustomResourceDefinitions()
	for {
		def, err := crds.Get(context.Background(), c.gvr.GroupResource().String(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fixed := mapListCRD(c)
		def.Spec.Versions = fixed.Spec.Versions
		if _, err = crds.Update(context.Background(), def, metav1.UpdateOptions{}); err == nil {
			break
		}
	}
	c.waitCondition(t, "ns", "x", metav1.ConditionTrue, "Reconciled")
	if u, err = r.Get(context.Background(), "x", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := conditionOfType(u, "Healthy"); !ok {
		t.Fatalf("the other manager's condition is gone: %v", u.Object["status"])
	}
	a.waitHealth("k8s-status-k8s", func(l cell.Level, _ string, _ error) bool { return l == cell.StatusOK })
}
