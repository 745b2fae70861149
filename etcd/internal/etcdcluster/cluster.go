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
	"net/url"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/converge-go/converge/etcd/internal/freeport"
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
		peers[i] = "http://" + freeport.Addr(t)
		clients[i] = "http://" + freeport.Addr(t)
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
		t.Cleanup(func() { c.Stop(i) })
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

func mustURL(t testing.TB, s string) url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("etcdcluster: %v", err)
	}
	return *u
}

// Leader returns the index of the member that is raft leader now, or -1
// when none of the running members is.
func (c *Cluster) Leader() int {
	for i, e := range c.members {
		if e == nil {
			continue
		}
		if e.Server.Leader() == e.Server.MemberID() {
			return i
		}
	}
	return -1
}

// WaitLeader waits until a running member is leader and returns its index.
func (c *Cluster) WaitLeader(t testing.TB) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if i := c.Leader(); i >= 0 {
			return i
		}
		if time.Now().After(deadline) {
			t.Fatal("etcdcluster: no leader after 30s")
		}
		// Wait for any running member's next leader change.
		c.anyLeaderChange(time.Until(deadline))
	}
}

func (c *Cluster) anyLeaderChange(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	done := make(chan struct{})
	defer close(done)
	changed := make(chan struct{}, len(c.members))
	for _, e := range c.members {
		if e == nil {
			continue
		}
		go func(ch <-chan struct{}) {
			select {
			case <-ch:
				changed <- struct{}{}
			case <-done:
			}
		}(e.Server.LeaderChangedNotify())
	}
	select {
	case <-changed:
	case <-timer.C:
	}
}

// Stop stops member i (its data directory stays). It is embed's Close:
// a leader first hands raft leadership to a peer, so this is a clean stop
// rather than a crash.
func (c *Cluster) Stop(i int) {
	if e := c.members[i]; e != nil {
		c.members[i] = nil
		e.Close()
	}
}

// LeakOptions are the goleak options for test binaries that run
// multi-member clusters: etcd's peer transport leaves idle HTTP
// connections that close on their own a little after the members stop.
// Nothing of converge runs an HTTP client or server in those tests.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).abortPendingRead"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
	}
}
