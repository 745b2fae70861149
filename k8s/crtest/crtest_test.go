package crtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/converge-go/converge/k8s/apiservertest"
)

var srv *apiservertest.Server

func TestMain(m *testing.M) { os.Exit(apiservertest.RunTests(m, &srv)) }

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.crtest.converge.dev}
spec:
  group: crtest.converge.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// controller-runtime's client, with its default (discovering) RESTMapper,
// works against the server: a CRD installed from a file is found by
// kind, and objects are created, read, listed, their status updated and
// deleted.
func TestControllerRuntimeClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	file := filepath.Join(t.TempDir(), "widgets.yaml")
	if err := os.WriteFile(file, []byte(widgetCRD), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := srv.InstallCRDFiles(ctx, file); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(srv.Config(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Group: "crtest.converge.dev", Version: "v1", Kind: "Widget"}
	mapping, err := c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil || mapping.Resource.Resource != "widgets" {
		t.Fatalf("RESTMapping: %+v, %v", mapping, err)
	}
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(gvk)
	w.SetNamespace("ns")
	w.SetName("w")
	w.Object["spec"] = map[string]any{"size": int64(3)}
	if err := c.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	w.Object["status"] = map[string]any{"ready": true}
	if err := c.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(gvk)
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "w"}, got); err != nil {
		t.Fatal(err)
	}
	if ready, _, _ := unstructured.NestedBool(got.Object, "status", "ready"); !ready {
		t.Fatalf("status %v", got.Object["status"])
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind("WidgetList"))
	if err := c.List(ctx, list, client.InNamespace("ns")); err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %d items, %v", len(list.Items), err)
	}
	if err := c.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "w"}, got); !apierrors.IsNotFound(err) {
		t.Fatalf("after delete: %v", err)
	}
}
