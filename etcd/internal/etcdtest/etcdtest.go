// Package etcdtest runs a real etcd server inside a test process, for the
// tests of every package of the converge etcd module: the embedded server
// of go.etcd.io/etcd/server/v3/embed, on 127.0.0.1 ports picked at random,
// with its data in a temporary directory.
//
// Start gives a running single-member server. Stop and Restart take it
// down and bring it back on the same ports and data, as a crash and a
// restart do; Compact compacts its history; Proxy puts a TCP proxy in front
// of it whose connections a test can cut and restore, to disconnect one
// client while the server (and other clients) go on. Client returns a
// client with short reconnect backoff, so that tests do not wait out
// gRPC's default two minutes.
//
// Everything is cleaned up with t.Cleanup. Nothing here skips: a test
// that cannot start etcd fails.
package etcdtest

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/converge-go/converge/etcd/internal/freeport"
)

// Server is one embedded etcd member.
type Server struct {
	t          testing.TB
	dir        string
	clientURL  url.URL
	peerURL    url.URL
	maxTxnOps  uint
	mu         sync.Mutex
	etcd       *embed.Etcd
	clientsMu  sync.Mutex
	adminCache *clientv3.Client
}

// Option tunes Start.
type Option func(*Server)

// WithMaxTxnOps raises the number of operations one transaction may hold
// (etcd's default is 128), for tests that load many keys quickly.
func WithMaxTxnOps(n uint) Option { return func(s *Server) { s.maxTxnOps = n } }

// Start starts a server and stops it when the test ends. It fails the
// test if etcd does not become ready within 30 seconds.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := &Server{t: t, dir: t.TempDir(), maxTxnOps: embed.DefaultMaxTxnOps}
	for _, o := range opts {
		o(s)
	}
	s.clientURL = url.URL{Scheme: "http", Host: freeport.Addr(t)}
	s.peerURL = url.URL{Scheme: "http", Host: freeport.Addr(t)}
	s.start()
	t.Cleanup(func() {
		s.clientsMu.Lock()
		if s.adminCache != nil {
			s.adminCache.Close()
		}
		s.clientsMu.Unlock()
		s.Stop()
	})
	return s
}

func (s *Server) start() {
	s.t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "etcdtest"
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{s.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{s.clientURL}
	cfg.ListenPeerUrls = []url.URL{s.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{s.peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{"stderr"}
	cfg.MaxTxnOps = s.maxTxnOps
	// Tests do not survive power loss; fsync only slows them down.
	cfg.UnsafeNoFsync = true
	// A single member elects itself at once; short ticks make a restart
	// ready in a fraction of a second instead of seconds.
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		s.t.Fatalf("etcdtest: start: %s", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		s.t.Fatalf("etcdtest: %s", err)
	case <-time.After(30 * time.Second):
		e.Close()
		s.t.Fatal("etcdtest: not ready after 30s")
	}
	s.mu.Lock()
	s.etcd = e
	s.mu.Unlock()
}

// Endpoint is the server's client URL.
func (s *Server) Endpoint() string { return s.clientURL.String() }

// Stop stops the server, keeping its data; it does nothing if stopped.
func (s *Server) Stop() {
	s.mu.Lock()
	e := s.etcd
	s.etcd = nil
	s.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// Restart starts a stopped server again on the same ports and data.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// Client returns a client of endpoint (the server's, or a proxy's), closed
// when the test ends. It reconnects within half a second of the endpoint
// coming back.
func (s *Server) Client(endpoint string) *clientv3.Client {
	s.t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 500 * time.Millisecond},
			MinConnectTimeout: time.Second,
		})},
	})
	if err != nil {
		s.t.Fatalf("etcdtest: client: %s", err)
	}
	s.t.Cleanup(func() { c.Close() })
	return c
}

// admin is the harness's own client, straight to the server.
func (s *Server) admin() *clientv3.Client {
	s.clientsMu.Lock()
	defer s.clientsMu.Unlock()
	if s.adminCache == nil {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint()}, DialTimeout: 5 * time.Second})
		if err != nil {
			s.t.Fatalf("etcdtest: client: %s", err)
		}
		s.adminCache = c
	}
	return s.adminCache
}

// Compact compacts the server's history up to its current revision and
// returns that revision: a watch from an earlier one fails with
// ErrCompacted.
func (s *Server) Compact(ctx context.Context) int64 {
	s.t.Helper()
	c := s.admin()
	resp, err := c.Get(ctx, "compact-probe")
	if err != nil {
		s.t.Fatalf("etcdtest: get: %s", err)
	}
	rev := resp.Header.Revision
	if _, err := c.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		s.t.Fatalf("etcdtest: compact %d: %s", rev, err)
	}
	return rev
}

// Put writes key=value through the harness's own client and returns the
// revision.
func (s *Server) Put(ctx context.Context, key, value string) int64 {
	s.t.Helper()
	resp, err := s.admin().Put(ctx, key, value)
	if err != nil {
		s.t.Fatalf("etcdtest: put %s: %s", key, err)
	}
	return resp.Header.Revision
}

// Delete deletes key through the harness's own client.
func (s *Server) Delete(ctx context.Context, key string) int64 {
	s.t.Helper()
	resp, err := s.admin().Delete(ctx, key)
	if err != nil {
		s.t.Fatalf("etcdtest: delete %s: %s", key, err)
	}
	return resp.Header.Revision
}

// Load writes n keys prefix+fmt.Sprintf(format, i) with value(i), in
// transactions of the server's MaxTxnOps.
func (s *Server) Load(ctx context.Context, n int, key func(i int) string, value func(i int) string) {
	s.t.Helper()
	batch := int(s.maxTxnOps)
	ops := make([]clientv3.Op, 0, batch)
	flush := func() {
		if len(ops) == 0 {
			return
		}
		if _, err := s.admin().Txn(ctx).Then(ops...).Commit(); err != nil {
			s.t.Fatalf("etcdtest: load: %s", err)
		}
		ops = ops[:0]
	}
	for i := range n {
		ops = append(ops, clientv3.OpPut(key(i), value(i)))
		if len(ops) == batch {
			flush()
		}
	}
	flush()
}

// String describes the server for failure messages.
func (s *Server) String() string { return fmt.Sprintf("etcd at %s (data %s)", s.Endpoint(), s.dir) }
