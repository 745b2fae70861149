// Package netlab builds a small network of network namespaces for the
// multi-process tests of the etcd module: a hub namespace with a bridge,
// and one namespace per node (an etcd member, a replica, the test's own
// client), each with one veth to the hub and an address in 10.77.0.0/24.
// Nothing is created in, or routed through, the host's namespace: the test
// process reaches the nodes by opening its sockets inside a client node
// (DialContext).
//
// It needs root and iproute2 (and nftables for Cut). Without them, New
// skips the test, or fails it when CI=true: a test that cannot run must not
// pass silently in CI.
package netlab

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netns"
)

// Lab is one test's network.
type Lab struct {
	t      testing.TB
	prefix string
	hub    string
	next   int
}

// Node is a network namespace on the lab's bridge.
type Node struct {
	lab  *Lab
	Name string // the namespace's name, for ip netns exec
	IP   string // its address on the bridge
}

var labs atomic.Int32

// New creates the lab's hub, or skips the test (fails it under CI=true)
// when the machine cannot build one. Everything is removed in t.Cleanup.
func New(t testing.TB) *Lab {
	t.Helper()
	if reason := unavailable(); reason != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("netlab: %s (CI=true: this test must run)", reason)
		}
		t.Skipf("netlab: %s", reason)
	}
	l := &Lab{t: t, prefix: fmt.Sprintf("cv%d-%d", os.Getpid(), labs.Add(1))}
	l.hub = l.prefix + "-hub"
	l.ip("netns", "add", l.hub)
	t.Cleanup(func() { l.del(l.hub) })
	l.ip("-n", l.hub, "link", "set", "lo", "up")
	l.ip("-n", l.hub, "link", "add", "br0", "type", "bridge")
	l.ip("-n", l.hub, "link", "set", "br0", "up")
	return l
}

func unavailable() string {
	if os.Geteuid() != 0 {
		return "network namespaces need root"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "iproute2's ip is not installed"
	}
	return ""
}

// Node adds a namespace to the lab, on the bridge, with the next address.
func (l *Lab) Node(name string) *Node {
	l.t.Helper()
	l.next++
	n := &Node{lab: l, Name: l.prefix + "-" + name, IP: fmt.Sprintf("10.77.0.%d", l.next)}
	l.ip("netns", "add", n.Name)
	l.t.Cleanup(func() { l.del(n.Name) })
	hubSide := fmt.Sprintf("v%d", l.next)
	l.ip("link", "add", hubSide, "netns", l.hub, "type", "veth", "peer", "name", "eth0", "netns", n.Name)
	l.ip("-n", l.hub, "link", "set", hubSide, "master", "br0", "up")
	l.ip("-n", n.Name, "addr", "add", n.IP+"/24", "dev", "eth0")
	l.ip("-n", n.Name, "link", "set", "eth0", "up")
	l.ip("-n", n.Name, "link", "set", "lo", "up")
	return n
}

func (l *Lab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		l.t.Fatalf("netlab: ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func (l *Lab) del(ns string) {
	_ = exec.Command("ip", "netns", "del", ns).Run()
}

// Command returns a command that runs in the node's namespace.
func (n *Node) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Cut drops every packet between the node and the addresses ips, both
// ways, with an nftables table in the node's namespace, as a partition
// does. Call Restore before cutting again.
func (n *Node) Cut(ips ...string) {
	n.lab.t.Helper()
	set := strings.Join(ips, ", ")
	rules := fmt.Sprintf(`table inet netlab {
	chain in { type filter hook input priority 0; ip saddr { %[1]s } drop; }
	chain out { type filter hook output priority 0; ip daddr { %[1]s } drop; }
}
`, set)
	cmd := n.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		n.lab.t.Fatalf("netlab: cut %s from %s: %v: %s", n.Name, set, err, out)
	}
}

// Restore removes what Cut added.
func (n *Node) Restore() {
	n.lab.t.Helper()
	if out, err := n.Command("nft", "delete", "table", "inet", "netlab").CombinedOutput(); err != nil {
		n.lab.t.Fatalf("netlab: restore %s: %v: %s", n.Name, err, out)
	}
}

// DialContext opens a TCP connection from inside the node's namespace, so
// that the test process can be a client on the lab's network. The socket
// is opened on a thread of its own that switches namespace and is then
// thrown away; no other thread of the process changes namespace.
func (n *Node) DialContext(ctx context.Context, addr string) (net.Conn, error) {
	var conn net.Conn
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		// Never unlocked: the thread is in another namespace and must
		// exit with this goroutine.
		var ns netns.NsHandle
		ns, err = netns.GetFromName(n.Name)
		if err != nil {
			return
		}
		defer ns.Close()
		if err = netns.Set(ns); err != nil {
			return
		}
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}()
	<-done
	return conn, err
}
