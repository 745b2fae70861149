package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/hive/hivetest"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// startAgent installs the CRD (and Events) and starts the agent on a
// directory of its own, which it returns.
func startAgent(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(CRD, &crd); err != nil {
		t.Fatal(err)
	}
	if err := srv.InstallCRD(ctx, &crd); err != nil {
		t.Fatal(err)
	}
	if err := srv.InstallEvents(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := hivetest.Logger(t, hivetest.LogLevel(slog.LevelError))
	h := newHive(agentConfig{Dir: dir, Rest: srv.Config()})
	if err := h.Start(log, ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Stop(log, context.Background()); err != nil {
			t.Error(err)
		}
	})
	return dir
}

// runs numbers the tests' runs (-count): each uses namespaces of its
// own, since the server outlives a run.
var runs atomic.Int64

// namespace returns a namespace name no other run uses.
func namespace(prefix string) string { return fmt.Sprintf("%s-%d", prefix, runs.Add(1)) }

// files is the DesiredFiles of namespace ns.
func files(t *testing.T, ns string) dynamic.ResourceInterface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	return dyn.Resource(desiredFiles).Namespace(ns)
}

// The agent against a real API server: kubectl apply, kubectl wait
// --for=condition=Ready, the printer columns of kubectl get, a
// DesiredFile that fails validation, an update and a delete.
func TestEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := startAgent(t)
	ns := namespace("e2e")
	files := files(t, ns)

	// kubectl apply -f motd.yaml; kubectl wait --for=condition=Ready
	kubectlApply(t, files, "motd", "motd", "hello\n")
	waitReady(t, files, "motd", "True", "Reconciled")
	wantFile(t, dir, ns+"/motd", "hello\n")

	// kubectl get desiredfiles: the printer columns show the condition.
	cols, rows := kubectlGet(t, srv.Config(), "/apis/files.example.converge.dev/v1/namespaces/"+ns+"/desiredfiles")
	if !slices.Equal(cols, []string{"Name", "Path", "Ready", "Reason", "Age"}) {
		t.Fatalf("columns %v", cols)
	}
	if r := rows["motd"]; len(r) < 4 || r[1] != "motd" || r[2] != "True" || r[3] != "Reconciled" {
		t.Fatalf("row of motd: %v", r)
	}

	// A DesiredFile whose spec the agent rejects: its condition says why,
	// and nothing is written.
	kubectlApply(t, files, "escape", "../etc/passwd", "x")
	cond := waitReady(t, files, "escape", "False", "TransformFailed")
	if msg := cond["message"].(string); !strings.Contains(msg, `"../etc/passwd"`) || !strings.Contains(msg, "spec.path must be a plain file name") {
		t.Fatalf("message %q", msg)
	}

	// A new generation is reconciled and reported as such.
	kubectlApply(t, files, "motd", "motd", "hello again\n")
	cond = waitReady(t, files, "motd", "True", "Reconciled")
	if cond["observedGeneration"] != int64(2) {
		t.Fatalf("observedGeneration %v, want 2", cond["observedGeneration"])
	}
	wantFile(t, dir, ns+"/motd", "hello again\n")

	// kubectl delete: the file goes, then (its finalizer removed) the
	// object.
	if err := files.Delete(ctx, "motd", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNoFile(t, dir, ns+"/motd")
	waitGone(t, files, "motd")
	if entries, _ := os.ReadDir(filepath.Join(dir, ns)); len(entries) != 0 {
		t.Fatalf("directory not empty: %v", entries)
	}
}

// waitGone is kubectl wait --for=delete: it watches the object until it
// is deleted for good.
func waitGone(t *testing.T, r dynamic.ResourceInterface, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
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
	t.Fatalf("%s is still there", name)
}

// kubectlApply is kubectl apply --server-side of a DesiredFile, and
// returns the object as the server answered.
func kubectlApply(t *testing.T, r dynamic.ResourceInterface, name, path, content string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "files.example.converge.dev/v1", "kind": "DesiredFile",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"path": path, "content": content},
	}}
	got, err := r.Apply(context.Background(), name, u, metav1.ApplyOptions{FieldManager: "kubectl"})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// waitReady is kubectl wait --for=condition=Ready (with the status and
// reason given): it watches the object until its Ready condition
// matches, for its current generation, and returns it.
func waitReady(t *testing.T, r dynamic.ResourceInterface, name, status, reason string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := r.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var last map[string]any
	for ev := range w.ResultChan() {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m := c.(map[string]any)
			if m["type"] != "Ready" {
				continue
			}
			last = m
			if m["status"] == status && m["reason"] == reason && m["observedGeneration"] == u.GetGeneration() {
				return m
			}
		}
	}
	t.Fatalf("%s: condition Ready=%s/%s never came; last %v", name, status, reason, last)
	return nil
}

// kubectlGet is kubectl get: the server renders the table with the
// CRD's printer columns. It returns the column names and each row's
// cells by name.
func kubectlGet(t *testing.T, cfg *rest.Config, path string) ([]string, map[string][]string) {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, cfg.Host+path, nil)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	rows := map[string][]string{}
	for _, r := range table.Rows {
		var cells []string
		for _, c := range r.Cells {
			s, _ := c.(string)
			cells = append(cells, s)
		}
		if len(cells) > 0 {
			rows[cells[0]] = cells
		}
	}
	return cols, rows
}

// wantFile checks a file the condition says is written.
func wantFile(t *testing.T, dir, name, content string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil || string(b) != content {
		t.Fatalf("%s: %q, %v; want %q", name, b, err, content)
	}
}

// waitNoFile polls (every 10 ms, for at most a minute) until the agent
// has removed the file.
func waitNoFile(t *testing.T, dir, name string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(filepath.Join(dir, name)); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists", name)
		}
		<-tick.C
	}
}
