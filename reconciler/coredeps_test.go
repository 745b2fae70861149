package reconciler_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestCoreLinksNoHeavyDependencies: a program that imports only
// reconciler, index or metrics links no OpenTelemetry, Kubernetes, etcd
// or netlink package, and the core module's go.mod requires no
// OpenTelemetry (the adapter is the otel module).
func TestCoreLinksNoHeavyDependencies(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", "-deps",
		"github.com/converge-go/converge/reconciler",
		"github.com/converge-go/converge/index",
		"github.com/converge-go/converge/metrics").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %s\n%s", err, out)
	}
	forbidden := []string{"go.opentelemetry.io/", "k8s.io/", "go.etcd.io/", "github.com/vishvananda/netlink"}
	for _, pkg := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(pkg, f) {
				t.Errorf("the core links %s", pkg)
			}
		}
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mod), "go.opentelemetry.io") {
		t.Error("the core module's go.mod requires OpenTelemetry")
	}
}
