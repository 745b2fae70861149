// Package nstest gives tests a private network namespace, and the rule
// for when there is none: skip with the reason, unless the environment
// says CI, where a skip would hide a test that must run.
package nstest

import (
	"os"
	"testing"

	"github.com/converge-go/converge/internal/netroute"
)

// New returns a new network namespace that is closed (and so destroyed)
// when the test ends. Where namespaces cannot be created it skips the
// test saying why, or fails it when CI is set: CI machines run as root,
// and a silent skip there must not pass.
func New(t testing.TB) *netroute.Namespace {
	t.Helper()
	ns, err := netroute.NewNamespace()
	if err != nil {
		Unavailable(t, err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

// Unavailable skips or fails the test because a namespace could not be
// had, as New does.
func Unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set and this test needs a network namespace: %v", err)
	}
	t.Skipf("no network namespace, so this test cannot run here: %v", err)
}
