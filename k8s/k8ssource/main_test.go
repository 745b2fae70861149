package k8ssource_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/converge-go/converge/k8s/internal/apiservertest"
)

// One API server (with its watch cache, as in a cluster) serves every
// test of the package: each test installs a CRD of its own. A second one
// without the watch cache, started by the tests that need it, serves
// watches from etcd, where a compaction expires a resourceVersion.
var (
	cached       *apiservertest.Server
	uncachedOnce sync.Once
	uncachedSrv  *apiservertest.Server
	uncachedErr  error
)

func uncached(t *testing.T) *apiservertest.Server {
	t.Helper()
	uncachedOnce.Do(func() { uncachedSrv, uncachedErr = apiservertest.Start("--watch-cache=false") })
	if uncachedErr != nil {
		t.Fatal(uncachedErr)
	}
	return uncachedSrv
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	var err error
	if cached, err = apiservertest.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	cached.Close()
	if uncachedSrv != nil {
		uncachedSrv.Close()
	}
	if code != 0 {
		return code
	}
	if err := goleak.Find(apiservertest.LeakOptions()...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
