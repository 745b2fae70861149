package apiservertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
)

// runs numbers the runs of a test (-count), for names of their own.
var runs atomic.Int64

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Discovery of every group works (the core group empty), and finds the
// CRDs installed, with their status subresource.
func TestDiscovery(t *testing.T) {
	ctx := testContext(t)
	if err := shared.InstallCRD(ctx, CRD("disco.converge.dev", "Disco", "discos")); err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(shared.Config())
	if err != nil {
		t.Fatal(err)
	}
	groups, resources, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range groups {
		names = append(names, g.Name)
	}
	if !slices.Contains(names, "") || !slices.Contains(names, "apiextensions.k8s.io") || !slices.Contains(names, "disco.converge.dev") {
		t.Fatalf("groups %v", names)
	}
	var found []string
	for _, rl := range resources {
		if rl.GroupVersion == "disco.converge.dev/v1" {
			for _, r := range rl.APIResources {
				found = append(found, r.Name)
			}
		}
	}
	if !slices.Equal(found, []string{"discos", "discos/status"}) {
		t.Fatalf("resources of disco.converge.dev/v1: %v", found)
	}
}

// CRDs are read from YAML files of several documents; a document of
// another kind, or with an unknown field, is refused.
func TestInstallCRDFiles(t *testing.T) {
	ctx := testContext(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "crds.yaml")
	yaml := `# two CRDs
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: ones.files.converge.dev}
spec:
  group: files.converge.dev
  scope: Namespaced
  names: {plural: ones, kind: One, listKind: OneList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: twos.files.converge.dev}
spec:
  group: files.converge.dev
  scope: Cluster
  names: {plural: twos, kind: Two, listKind: TwoList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`
	if err := os.WriteFile(good, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := shared.InstallCRDFiles(ctx, good); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(shared.Config())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"ones", "twos"} {
		if _, err := dyn.Resource(schema.GroupVersionResource{Group: "files.converge.dev", Version: "v1", Resource: r}).List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("%s: %v", r, err)
		}
	}
	for _, bad := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
		strings.Replace(yaml, "scope: Cluster", "scope: Cluster\n  colour: blue", 1),
	} {
		if _, err := ReadCRDs([]byte(bad)); err == nil {
			t.Fatalf("no error for %q", bad)
		}
	}
}

// A typed client of Leases creates, gets and updates one, with the
// resourceVersion conflict a stale update gets.
func TestLeases(t *testing.T) {
	ctx := testContext(t)
	if err := shared.InstallLeases(ctx); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(shared.Config())
	if err != nil {
		t.Fatal(err)
	}
	leases := cs.CoordinationV1().Leases(fmt.Sprintf("ns%d", runs.Add(1)))
	holder, secs := "a", int32(5)
	l, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "lock"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stale := l.DeepCopy()
	other := "b"
	l.Spec.HolderIdentity = &other
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Update(ctx, stale, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "modified") {
		t.Fatalf("stale update: %v", err)
	}
	got, err := leases.Get(ctx, "lock", metav1.GetOptions{})
	if err != nil || *got.Spec.HolderIdentity != "b" || got.Spec.RenewTime == nil {
		t.Fatalf("%+v, %v", got, err)
	}
}

// client-go's events library records Events, a repeated one as a series
// (which it patches with a strategic merge patch). It writes the second
// of a series at once, later ones only when it refreshes the series.
func TestEvents(t *testing.T) {
	ctx := testContext(t)
	if err := shared.InstallEvents(ctx); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(shared.Config())
	if err != nil {
		t.Fatal(err)
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	sctx, stop := context.WithCancel(ctx)
	b.StartRecordingToSink(sctx.Done())
	defer func() { stop(); b.Shutdown() }()
	rec := b.NewRecorder(runtime.NewScheme(), "test-controller")
	ns := fmt.Sprintf("evns%d", runs.Add(1))
	regarding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "disco.converge.dev/v1", "kind": "Disco",
		"metadata": map[string]any{"name": "d", "namespace": ns, "uid": "u-1"},
	}}
	w, err := cs.EventsV1().Events(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// The second is sent once the first is written: sooner, the library
	// may patch a series before the event exists, and retries only 10 s
	// later.
	rec.Eventf(regarding, nil, "Warning", "Broken", "Reconcile", "it %s", "broke")
	names := map[string]bool{}
	for ev := range w.ResultChan() {
		e, ok := ev.Object.(*eventsv1.Event)
		if !ok || ev.Type == watch.Deleted {
			t.Fatalf("event %s %T", ev.Type, ev.Object)
		}
		if names[e.Name] = true; len(names) > 1 {
			t.Fatalf("events %v, want one with a series", names)
		}
		if ev.Type == watch.Added {
			rec.Eventf(regarding, nil, "Warning", "Broken", "Reconcile", "it %s", "broke")
		}
		if seriesCount(e) == 2 {
			if e.Reason != "Broken" || e.Note != "it broke" || e.Regarding.Name != "d" || e.ReportingController != "test-controller" {
				t.Fatalf("event %+v", e)
			}
			return
		}
	}
	t.Fatal("no series of 2")
}

func seriesCount(e *eventsv1.Event) int32 {
	if e.Series == nil {
		return 1
	}
	return e.Series.Count
}

// A blackholed link leaves its requests unanswered until it is
// restored, and no other client is affected.
func TestLinkBlackhole(t *testing.T) {
	ctx := testContext(t)
	crd := CRD("link.converge.dev", "Link", "links")
	if err := shared.InstallCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
	link := shared.NewLink()
	cut, err := dynamic.NewForConfig(link.Config())
	if err != nil {
		t.Fatal(err)
	}
	fine, err := dynamic.NewForConfig(shared.Config())
	if err != nil {
		t.Fatal(err)
	}
	list := func(c *dynamic.DynamicClient, d time.Duration) error {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		_, err := c.Resource(GVR(crd)).List(ctx, metav1.ListOptions{})
		return err
	}
	if err := list(cut, time.Minute); err != nil {
		t.Fatal(err)
	}
	link.Blackhole()
	if err := list(cut, 200*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a blackholed request ended with %v", err)
	}
	if err := list(fine, time.Minute); err != nil {
		t.Fatalf("another client: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- list(cut, time.Minute) }()
	select {
	case err := <-done:
		t.Fatalf("answered while blackholed: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	link.Restore()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
