package lease_test

import (
	"os"
	"testing"

	"github.com/converge-go/converge/k8s/apiservertest"
)

// One API server serves every test of the package, each with a Lease of
// its own.
var srv *apiservertest.Server

func TestMain(m *testing.M) { os.Exit(apiservertest.RunTests(m, &srv)) }
