package k8ssource_test

import (
	"os"
	"testing"

	"github.com/converge-go/converge/k8s/internal/apiservertest"
)

// One API server (with its watch cache, as in a cluster) serves every
// test of the package: each test installs a CRD of its own. The tests run
// one at a time: some stop and start the server.
var cached *apiservertest.Server

func TestMain(m *testing.M) { os.Exit(apiservertest.RunTests(m, &cached)) }
