package k8ssource_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/converge-go/converge/k8s/internal/apiservertest"
)

// One API server (with its watch cache, as in a cluster) serves every
// test of the package: each test installs a CRD of its own. The tests run
// one at a time: some stop and start the server.
var cached *apiservertest.Server

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	if cached, err = apiservertest.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	cached.Close()
	if code != 0 {
		return code
	}
	if err := apiservertest.FindLeaks(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
