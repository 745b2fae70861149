package main

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A spec.path over 255 bytes could never be written: Transform refuses
// it, and the CRD's schema refuses more than 255 characters.
func TestLongPathRefused(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"namespace": "ns", "name": "long"},
		"spec":     map[string]any{"path": strings.Repeat("é", 128)}, // 256 bytes
	}}
	if _, err := fromDesiredFile(u); err == nil || !strings.Contains(err.Error(), "at most 255 bytes") {
		t.Fatalf("Transform of a 256-byte path: %v", err)
	}
	u.Object["spec"] = map[string]any{"path": strings.Repeat("x", 255)}
	if _, err := fromDesiredFile(u); err != nil {
		t.Fatalf("Transform of a 255-byte path: %v", err)
	}

	startAgent(t)
	r := files(t, namespace("longpath"))
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "files.example.converge.dev/v1", "kind": "DesiredFile",
		"metadata": map[string]any{"name": "long"},
		"spec":     map[string]any{"path": strings.Repeat("x", 256)},
	}}
	if _, err := r.Apply(context.Background(), "long", obj, metav1.ApplyOptions{FieldManager: "kubectl"}); err == nil || !strings.Contains(err.Error(), "255") {
		t.Fatalf("the API server took a 256-character path: %v", err)
	}
}

// An object whose spec.path the file system can never take (more than
// 255 bytes in fewer characters) fails, and is still deleted at once:
// its Delete finds nothing there.
func TestLongPathObjectDeleted(t *testing.T) {
	dir := startAgent(t)
	r := files(t, namespace("longpath"))
	kubectlApply(t, r, "long", strings.Repeat("é", 200), "x") // 400 bytes
	waitReady(t, r, "long", "False", "TransformFailed")
	if err := r.Delete(context.Background(), "long", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, r, "long")

	// A row made before Transform refused such paths: its Delete
	// succeeds, where it used to fail with "file name too long".
	f := &File{Namespace: "ns", Name: "long", Path: strings.Repeat("x", 300)}
	// (Update first: it makes the namespace's directory, so that the
	// name is looked up in it.)
	if err := (fileOps{dir: dir}).Update(context.Background(), nil, 0, f); err == nil {
		t.Fatal("Update of a name too long succeeded")
	}
	if err := (fileOps{dir: dir}).Delete(context.Background(), nil, 0, f); err != nil {
		t.Fatalf("Delete of a name too long: %v", err)
	}
}
