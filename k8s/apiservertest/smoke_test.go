package apiservertest

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// The server starts, serves a CRD's resources through Config, keeps its
// objects across a stop and start, and sees objects put into etcd
// directly.
func TestStartStopStart(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	crd := CRD("smoke.converge.dev", "Smoke", "smokes")
	if err := s.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	r := dyn.Resource(GVR(crd)).Namespace("ns")
	obj := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "smoke.converge.dev/v1", "kind": "Smoke",
			"metadata": map[string]any{"name": name, "namespace": "ns"},
		}}
	}
	if _, err := r.Create(ctx, obj("a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.StopAPI()
	if _, err := r.Get(ctx, "a", metav1.GetOptions{}); err == nil {
		t.Fatal("a stopped server answered")
	}
	if err := s.PutRaw(ctx, GVR(crd), []*unstructured.Unstructured{obj("b")}); err != nil {
		t.Fatal(err)
	}
	if err := s.StartAPI(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := r.Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Fatalf("%s after the restart: %v", name, err)
		}
	}
}
