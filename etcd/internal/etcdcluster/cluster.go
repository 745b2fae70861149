// Package etcdcluster runs real etcd servers for the tests of the etcd
// module: embedded in the test process (go.etcd.io/etcd/server/v3/embed) on
// 127.0.0.1, one or several members, with short raft ticks so that lease
// expiry and elections take a second rather than many. Clients may reach a
// member through a Proxy that a test can cut, to partition a replica from
// etcd without touching the network stack.
//
// It is a test harness: every function takes a testing.TB and fails the
// test on error; servers and proxies stop in t.Cleanup.
package etcdcluster

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Tick and election timeout of the test servers. The server's shortest
// lease TTL is 1.5 election timeouts, so with these a 1 s TTL is honoured
// (the defaults, 100 ms and 1 s, would raise every TTL below 2 s to 2 s).
const (
	tickMs     = 20
	electionMs = 200
)

// Cluster is a running etcd cluster of in-process members.
type Cluster struct {
	members []*embed.Etcd
	clients []string
}

// Start starts a cluster of n members (n >= 1) and waits until it serves.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	peers := make([]string, n)
	clients := make([]string, n)
	for i := range n {
		peers[i] = "http://" + freeAddr(t)
		clients[i] = "http://" + freeAddr(t)
	}
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("m%d=%s", i, peers[i]))
	}
	c := &Cluster{clients: clients}
	for i := range n {
		cfg := embed.NewConfig()
		cfg.Name = fmt.Sprintf("m%d", i)
		cfg.Dir = t.TempDir()
		cfg.TickMs, cfg.ElectionMs = tickMs, electionMs
		cfg.ListenPeerUrls = []url.URL{mustURL(t, peers[i])}
		cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
		cfg.ListenClientUrls = []url.URL{mustURL(t, clients[i])}
		cfg.AdvertiseClientUrls = cfg.ListenClientUrls
		cfg.InitialCluster = strings.Join(initial, ",")
		cfg.InitialClusterToken = "converge-test"
		cfg.LogLevel = "error"
		cfg.Logger = "zap"
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			t.Fatalf("etcdcluster: start member %d: %v", i, err)
		}
		c.members = append(c.members, e)
		t.Cleanup(e.Close)
	}
	for i, e := range c.members {
		select {
		case <-e.Server.ReadyNotify():
		case err := <-e.Err():
			t.Fatalf("etcdcluster: member %d: %v", i, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("etcdcluster: member %d not ready after 30s", i)
		}
	}
	return c
}

// Endpoints returns the client URLs of all members.
func (c *Cluster) Endpoints() []string { return append([]string(nil), c.clients...) }

// Client returns a client of the whole cluster, closed in t.Cleanup.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return NewClient(t, c.clients...)
}

// NewClient returns a client of the given endpoints, closed in t.Cleanup.
func NewClient(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcdcluster: client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("etcdcluster: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

func mustURL(t testing.TB, s string) url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("etcdcluster: %v", err)
	}
	return *u
}
