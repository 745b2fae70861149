package netlab

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Etcd is an etcd cluster of server processes (etcdcluster/etcdserver),
// one node each, for tests that partition members from each other.
type Etcd struct {
	lab       *Lab
	Nodes     []*Node
	Procs     []*Proc
	Endpoints []string
}

// StartEtcd builds the test etcd server and starts a cluster of members
// processes, one node each, and waits until every member serves.
func (l *Lab) StartEtcd(t testing.TB, members int) *Etcd {
	t.Helper()
	server := Build(t, "github.com/converge-go/converge/etcd/internal/etcdcluster/etcdserver")
	e := &Etcd{lab: l}
	var initial []string
	for i := range members {
		n := l.Node(fmt.Sprintf("etcd%d", i))
		e.Nodes = append(e.Nodes, n)
		e.Endpoints = append(e.Endpoints, "http://"+n.IP+":2379")
		initial = append(initial, fmt.Sprintf("m%d=http://%s:2380", i, n.IP))
	}
	for i, n := range e.Nodes {
		e.Procs = append(e.Procs, n.Start(t, n.Name, server, "-name", fmt.Sprintf("m%d", i), "-data-dir", t.TempDir(),
			"-client-url", e.Endpoints[i], "-peer-url", "http://"+n.IP+":2380",
			"-initial-cluster", strings.Join(initial, ",")))
	}
	for _, p := range e.Procs {
		p.WaitLine("ready", 30*time.Second)
	}
	return e
}

// Client returns a client of endpoints whose connections are opened from
// inside node n; it is closed in t.Cleanup.
func (n *Node) Client(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(n.DialContext)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// CutPeers partitions member i from the other members only, as a broken
// link between etcd hosts does: clients still reach it, and it keeps
// answering them, without a leader.
func (e *Etcd) CutPeers(i int) {
	var peers []string
	for j, n := range e.Nodes {
		if j != i {
			peers = append(peers, n.IP)
		}
	}
	e.Nodes[i].Cut(peers...)
}

// Watchers returns how many watchers member i serves now (its
// etcd_debugging_mvcc_watcher_total), asked from node from.
func (e *Etcd) Watchers(t testing.TB, from *Node, i int) int {
	t.Helper()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return from.DialContext(ctx, addr) }}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(e.Endpoints[i] + "/metrics")
	if err != nil {
		t.Fatalf("netlab: metrics of member %d: %v", i, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "etcd_debugging_mvcc_watcher_total "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	t.Fatalf("netlab: member %d reports no etcd_debugging_mvcc_watcher_total", i)
	return 0
}

// WaitNoLeader waits until member i says it has no leader (as it does an
// election timeout after it is cut from its peers), asking from node from.
func (e *Etcd) WaitNoLeader(t testing.TB, from *Node, i int) {
	t.Helper()
	cli := from.Client(t, e.Endpoints[i])
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := cli.Status(ctx, e.Endpoints[i])
		cancel()
		if err == nil && st.Leader == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond) // polling another process
	}
	t.Fatalf("netlab: member %d still has a leader", i)
}

// ServingWatch waits until the members serve want watchers between them
// and returns a member other than skip that serves one, or -1 when only
// skip does.
func (e *Etcd) ServingWatch(t testing.TB, from *Node, want, skip int) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		counts := make([]int, len(e.Nodes))
		total := 0
		for i := range e.Nodes {
			counts[i] = e.Watchers(t, from, i)
			total += counts[i]
		}
		if total >= want {
			for i, n := range counts {
				if i != skip && n > 0 {
					return i
				}
			}
			return -1
		}
		time.Sleep(50 * time.Millisecond) // polling other processes
	}
	t.Fatalf("netlab: fewer than %d watchers after 30s", want)
	return -1
}

// Leader returns the index of the member that leads now, asking from node
// from, or -1 when none says it does.
func (e *Etcd) Leader(t testing.TB, from *Node) int {
	t.Helper()
	cli := from.Client(t, e.Endpoints...)
	for i, ep := range e.Endpoints {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := cli.Status(ctx, ep)
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			return i
		}
	}
	return -1
}

// MakeFollower moves etcd leadership away from member i if it leads, so
// that cutting i from its peers tests what a partitioned follower does,
// without an etcd election on top (cutting the leader is a fault of its
// own). It asks from node from and fails the test if leadership does not
// move.
func (e *Etcd) MakeFollower(t testing.TB, from *Node, i int) {
	t.Helper()
	if e.Leader(t, from) != i {
		return
	}
	other := (i + 1) % len(e.Nodes)
	cli := from.Client(t, e.Endpoints[i])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, e.Endpoints[other])
	if err != nil {
		t.Fatalf("netlab: status of member %d: %v", other, err)
	}
	if _, err := cli.MoveLeader(ctx, st.Header.MemberId); err != nil {
		t.Fatalf("netlab: move etcd leadership from member %d to %d: %v", i, other, err)
	}
	if now := e.Leader(t, from); now == i {
		t.Fatalf("netlab: member %d still leads after MoveLeader", i)
	}
}
