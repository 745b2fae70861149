package apiservertest_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/converge-go/converge/k8s/apiservertest"
)

var srv *apiservertest.Server

// A test package starts one server for all its tests, and checks at the
// end that nothing leaked.
func ExampleRunTests() {
	// In the test package: func TestMain(m *testing.M) { os.Exit(apiservertest.RunTests(m, &srv)) }
	var m *testing.M
	os.Exit(apiservertest.RunTests(m, &srv))
}

// A test installs its CRD from the YAML file the project ships, and
// talks to the server with any client built from Config.
func ExampleServer_InstallCRDFiles() {
	ctx := context.Background()
	if err := srv.InstallCRDFiles(ctx, "config/crd/widgets.yaml"); err != nil {
		panic(err)
	}
	dyn, err := dynamic.NewForConfig(srv.Config())
	if err != nil {
		panic(err)
	}
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default"},
	}}
	gvr := apiservertest.GVR(apiservertest.CRD("example.com", "Widget", "widgets"))
	if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, w, metav1.CreateOptions{}); err != nil {
		panic(err)
	}
	fmt.Println("created")
}

// A replica's own connection made to stop answering, as in a network
// partition between it and the API server.
func ExampleLink() {
	link := srv.NewLink()
	cfg := link.Config() // give it to the replica under test
	_ = cfg
	link.Blackhole()
	// ... the replica's requests wait, unanswered ...
	link.Restore()
}
