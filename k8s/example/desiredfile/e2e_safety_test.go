package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// Two namespaces that ask for the same spec.path get a file each, in
// their own directory: neither overwrites the other's.
func TestNamespacesDoNotCollide(t *testing.T) {
	dir := startAgent(t)
	nsA, nsB := namespace("team-a"), namespace("team-b")
	a, b := files(t, nsA), files(t, nsB)
	kubectlApply(t, a, "motd", "motd", "from a\n")
	kubectlApply(t, b, "motd", "motd", "from b\n")
	waitReady(t, a, "motd", "True", "Reconciled")
	waitReady(t, b, "motd", "True", "Reconciled")
	wantFile(t, dir, nsA+"/motd", "from a\n")
	wantFile(t, dir, nsB+"/motd", "from b\n")
}

// A symbolic link planted where the agent used to write its temporary
// file (and where a predictable one would be) is never followed: the
// file it points to outside the directory stays as it was.
func TestTemporaryFileIgnoresSymlinks(t *testing.T) {
	dir := startAgent(t)
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("untouched"), 0o600); err != nil {
		t.Fatal(err)
	}
	ns := namespace("symlink")
	if err := os.MkdirAll(filepath.Join(dir, ns), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".tmp-motd", ns + "/.tmp-motd"} {
		if err := os.Symlink(victim, filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	r := files(t, ns)
	kubectlApply(t, r, "motd", "motd", "hello\n")
	waitReady(t, r, "motd", "True", "Reconciled")
	wantFile(t, dir, ns+"/motd", "hello\n")
	if b, err := os.ReadFile(victim); err != nil || string(b) != "untouched" {
		t.Fatalf("the symlink's target was written: %q, %v", b, err)
	}
}

// A condition quotes at most a short prefix of a value from the spec,
// cut on a character boundary.
func TestConditionQuotesShortPrefix(t *testing.T) {
	startAgent(t)
	r := files(t, namespace("quote"))
	secret := "../" + strings.Repeat("é", 30) + "TAIL-OF-THE-SECRET"
	kubectlApply(t, r, "long", secret, "x")
	cond := waitReady(t, r, "long", "False", "TransformFailed")
	msg := cond["message"].(string)
	if strings.Contains(msg, "TAIL") || !strings.Contains(msg, `"../éé`) || strings.ContainsRune(msg, '\uFFFD') {
		t.Fatalf("message %q", msg)
	}
}

// kstatus (what kubectl's, Flux's and Argo CD's health checks read) sees
// the example's objects as Current once their file is written,
// InProgress while a new generation is not reconciled yet, and Failed
// while the file cannot be written.
func TestKStatus(t *testing.T) {
	dir := startAgent(t)
	ns := namespace("kstatus")
	r := files(t, ns)
	compute := func(u *unstructured.Unstructured) status.Status {
		t.Helper()
		res, err := status.Compute(u)
		if err != nil {
			t.Fatal(err)
		}
		return res.Status
	}
	kubectlApply(t, r, "motd", "motd", "one\n")
	waitReady(t, r, "motd", "True", "Reconciled")
	if s := compute(get(t, r, "motd")); s != status.CurrentStatus {
		t.Fatalf("reconciled: %s", s)
	}
	// The answer to the update has the new generation, and the status
	// of the old one.
	if s := compute(kubectlApply(t, r, "motd", "motd", "two\n")); s != status.InProgressStatus {
		t.Fatalf("new generation: %s", s)
	}
	waitReady(t, r, "motd", "True", "Reconciled")

	// The namespace's directory replaced by a file: writes fail.
	nsDir := filepath.Join(dir, ns)
	if err := os.RemoveAll(nsDir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nsDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	kubectlApply(t, r, "motd", "motd", "three\n")
	waitReady(t, r, "motd", "False", "ReconcileFailed")
	if s := compute(get(t, r, "motd")); s != status.FailedStatus {
		t.Fatalf("failing: %s", s)
	}
	if err := os.Remove(nsDir); err != nil {
		t.Fatal(err)
	}
	waitReady(t, r, "motd", "True", "Reconciled")
	if s := compute(get(t, r, "motd")); s != status.CurrentStatus {
		t.Fatalf("recovered: %s", s)
	}
}

func get(t *testing.T, r interface {
	Get(context.Context, string, metav1.GetOptions, ...string) (*unstructured.Unstructured, error)
}, name string) *unstructured.Unstructured {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := r.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}
