package k8ssource_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-go/converge/k8s/apiservertest"
	"github.com/converge-go/converge/k8s/k8ssource"
)

// One API server (with its watch cache, as in a cluster) serves every
// test of the package: each test installs a CRD of its own. The tests run
// one at a time: some stop and start the server.
var cached *apiservertest.Server

// clientMetrics has client-go's metrics: they are installed once per
// process, before any client runs, as a program does first thing.
var clientMetrics = prometheus.NewRegistry()

func TestMain(m *testing.M) {
	if err := k8ssource.RegisterClientMetrics(clientMetrics); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(apiservertest.RunTests(m, &cached))
}
