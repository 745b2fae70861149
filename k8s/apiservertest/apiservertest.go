// Package apiservertest runs a real Kubernetes API server inside a test
// process, for testing controllers (converge's or anyone's) against the
// genuine article rather than a fake clientset: the generic API server of
// k8s.io/apiextensions-apiserver, which serves CustomResourceDefinitions
// and custom resources with the watch cache, resourceVersions and 410
// Gone, validation, server-side apply, finalizers and the status
// subresource, over an embedded etcd on 127.0.0.1. Nothing is downloaded
// or installed: no etcd or kube-apiserver binary, unlike envtest.
//
//	func TestMain(m *testing.M) { os.Exit(apiservertest.RunTests(m, &srv)) }
//
//	func TestMyController(t *testing.T) {
//		if err := srv.InstallCRDFiles(ctx, "config/crd/widgets.yaml"); err != nil { ... }
//		cfg := srv.Config() // a *rest.Config for client-go, controller-runtime, ...
//		...
//	}
//
// What it serves: the CRDs a test installs (CRD, InstallCRD,
// InstallCRDFiles), and on request Leases (InstallLeases) and
// events.k8s.io Events (InstallEvents), served as custom resources of
// their real group, version and kind. Discovery answers for /api (an
// empty core group) and /apis, so clients that discover every group
// first, such as controller-runtime's client with its default
// RESTMapper, work. What it does not serve: the core group's resources
// (Pods, ConfigMaps, Namespaces: a namespace need not exist to be used),
// controllers (no garbage collection, no namespace deletion), admission
// webhooks, and authorization: every request is allowed, so RBAC is not
// tested here.
//
// Clients get a rest.Config (Config) whose transport follows the server
// across StopAPI and StartAPI (a restarted server has a new port and a
// new loopback token), through which a test can inject a response (a
// 403, a 409) for the requests it chooses (Inject), cut every watch
// (CutWatches), or cut one client off (NewLink, Link.Blackhole). A test
// can also write objects straight into etcd (PutRaw), compact its
// history (Compact) to provoke a 410 Gone, and stop and start the API
// server while etcd keeps the data.
//
// Start one server per test binary and share it (RunTests): it takes a
// few seconds to start. Each test uses a CRD or a namespace of its own.
// Nothing here skips: a test that cannot start the server fails.
package apiservertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	servertesting "k8s.io/apiextensions-apiserver/pkg/cmd/server/testing"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// Server is an API server and the etcd it stores into. Start one per test
// binary and share it: each test uses a CRD or namespace of its own.
type Server struct {
	dir       string
	etcd      *embed.Etcd
	etcdURL   string
	kubecfg   string
	transport *switchTransport
	flags     []string

	mu      sync.Mutex
	api     *servertesting.TestServer
	etcdCli *clientv3.Client
}

// Start starts etcd and the API server, with flags added to the
// server's (for example "--watch-cache=false"). Call Close when done.
func Start(flags ...string) (*Server, error) {
	// The API server logs through klog; keep test output to failures.
	// Once: klog's logger is global, and read by running servers.
	quietKlog.Do(func() { klog.SetLogger(logr.Discard()) })
	dir, err := os.MkdirTemp("", "converge-apiserver")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, transport: newSwitchTransport(), flags: flags}
	if err := s.startEtcd(); err != nil {
		s.Close()
		return nil, err
	}
	s.kubecfg = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(s.kubecfg, []byte(placeholderKubeconfig), 0o600); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.StartAPI(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// placeholderKubeconfig is never used for a request: the authentication
// and authorization delegation need a file to start.
const placeholderKubeconfig = `apiVersion: v1
kind: Config
clusters:
- cluster:
    server: http://127.1.2.3:12345
  name: integration
contexts:
- context:
    cluster: integration
    user: test
  name: default-context
current-context: default-context
users:
- name: test
  user:
    password: test
    username: test
`

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) startEtcd() error {
	cfg := embed.NewConfig()
	cfg.Name = "apiservertest"
	cfg.Dir = filepath.Join(s.dir, "etcd")
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cp, err := freePort()
	if err != nil {
		return err
	}
	pp, err := freePort()
	if err != nil {
		return err
	}
	cu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", cp)}
	pu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", pp)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	s.etcd = e
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		return errors.New("etcd did not become ready in 60s")
	}
	s.etcdURL = cu.String()
	s.etcdCli, err = clientv3.New(clientv3.Config{Endpoints: []string{s.etcdURL}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	return err
}

var quietKlog sync.Once

type quietLogger struct{}

func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(string, ...any) {}
func (quietLogger) Logf(string, ...any)   {}

// StartAPI starts the API server (again, after StopAPI) on the same etcd
// and prefix: the objects and their resourceVersions survive. The
// rest.Config of Config follows it.
func (s *Server) StartAPI() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.api != nil {
		return errors.New("API server already running")
	}
	ts, err := servertesting.StartTestServer(quietLogger{}, nil, append([]string{
		"--etcd-prefix", StoragePrefix,
		"--etcd-servers", s.etcdURL,
		"--authentication-skip-lookup",
		"--authentication-kubeconfig", s.kubecfg,
		"--authorization-kubeconfig", s.kubecfg,
		"--kubeconfig", s.kubecfg,
		"--enable-priority-and-fairness=false",
		"--disable-admission-plugins", "NamespaceLifecycle,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy,MutatingAdmissionPolicy",
	}, s.flags...), nil)
	if err != nil {
		return fmt.Errorf("start API server: %w", err)
	}
	if err := s.transport.setBackend(ts.ClientConfig); err != nil {
		ts.TearDownFn()
		return err
	}
	s.api = &ts
	return nil
}

// StopAPI stops the API server, leaving etcd running. Open watches break
// and requests fail until StartAPI.
func (s *Server) StopAPI() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.api == nil {
		return
	}
	// The clients lose their connections first, as when a server
	// crashes; a graceful stop would also wait for their watches to end.
	s.transport.clearBackend()
	s.transport.cutWatches()
	s.api.TearDownFn()
	s.api = nil
}

// Config returns a client configuration for the server, with a high QPS
// limit: client-go's default of 5 requests per second would be the
// bottleneck of every test. Its content type is JSON: custom resources
// (Leases and Events here too) do not speak protobuf, which typed
// clientsets of built-in kinds would send otherwise. Each call returns a
// new copy.
func (s *Server) Config() *rest.Config { return newConfig(s.transport) }

func newConfig(rt http.RoundTripper) *rest.Config {
	return &rest.Config{
		Host:          "https://apiserver.test",
		Transport:     rt,
		QPS:           10000,
		Burst:         10000,
		ContentConfig: rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"},
	}
}

// Inject sets fn to answer the requests it chooses: it returns a non-nil
// error status (see Status) to fail the request with it, or nil to let it
// through. nil clears the injection.
func (s *Server) Inject(fn Fault) { s.transport.setFault(fn) }

// StoragePrefix is where the server keeps its objects in etcd: a custom
// resource is at StoragePrefix/<group>/<plural>/<namespace>/<name>.
const StoragePrefix = "/converge-test"

// Etcd returns a client of the server's etcd, for tests that write
// objects behind the API server's back (while it is stopped, or in bulk).
func (s *Server) Etcd() *clientv3.Client { return s.etcdCli }

// CutWatches breaks every watch open through Config's transport, as a
// lost connection does. The clients' next requests go through.
func (s *Server) CutWatches() { s.transport.cutWatches() }

// WaitWatches waits until at least n watches are open through Config's
// transport (a source's watch is open once its response has come), or
// ctx ends.
func (s *Server) WaitWatches(ctx context.Context, n int) error {
	t := s.transport
	for {
		t.mu.Lock()
		open, changed := len(t.watches), t.changed
		t.mu.Unlock()
		if open >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%d watches open, want %d: %w", open, n, ctx.Err())
		}
	}
}

// Compact compacts etcd's history up to its current revision, so that a
// watch from an older resourceVersion can no longer be served.
func (s *Server) Compact(ctx context.Context) (int64, error) {
	resp, err := s.etcdCli.Get(ctx, "compact-probe")
	if err != nil {
		return 0, err
	}
	rev := resp.Header.Revision
	if _, err := s.etcdCli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, err
	}
	return rev, nil
}

// Close stops the API server and etcd and removes their data.
func (s *Server) Close() {
	s.StopAPI()
	s.transport.close()
	if s.etcdCli != nil {
		s.etcdCli.Close()
	}
	if s.etcd != nil {
		s.etcd.Close()
	}
	os.RemoveAll(s.dir)
}
