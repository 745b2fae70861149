package main

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Two DesiredFiles of one namespace with one spec.path: the second is
// refused on itself (Conflict, naming the first), and the file stays the
// first's; deleting the second removes nothing; deleting the first
// removes its file, then the second holds the path and writes its own.
func TestSamePathOneNamespace(t *testing.T) {
	dir := startAgent(t)
	ns := namespace("samepath")
	r := files(t, ns)
	kubectlApply(t, r, "first", "motd", "from first\n")
	waitReady(t, r, "first", "True", "Reconciled")
	kubectlApply(t, r, "second", "motd", "from second\n")
	cond := waitReady(t, r, "second", "False", "Conflict")
	if msg := cond["message"].(string); !strings.Contains(msg, ns+"/first") {
		t.Fatalf("second's message %q does not name the holder", msg)
	}
	wantFile(t, dir, ns+"/motd", "from first\n")

	// The refused one goes: the holder's file stays, and it stays Ready.
	kubectlApply(t, r, "third", "motd", "from third\n")
	waitReady(t, r, "third", "False", "Conflict")
	if err := r.Delete(context.Background(), "third", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, r, "third")
	wantFile(t, dir, ns+"/motd", "from first\n")
	waitReady(t, r, "first", "True", "Reconciled")

	// The holder goes: the second gets the path.
	if err := r.Delete(context.Background(), "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, r, "first")
	waitReady(t, r, "second", "True", "Reconciled")
	wantFile(t, dir, ns+"/motd", "from second\n")
}
