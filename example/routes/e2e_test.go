package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/vishvananda/netlink"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/converge-go/converge/example/internal/agentkit"
	"github.com/converge-go/converge/example/internal/agenttest"
	"github.com/converge-go/converge/internal/netroute"
	"github.com/converge-go/converge/internal/netroute/nstest"
	"github.com/converge-go/converge/reconciler"
)

// fullInterval is the test's full reconciliation interval: short, so that
// drift is repaired quickly.
const fullInterval = 200 * time.Millisecond

// agent is one running routes agent, in-process: the same cells as main,
// with the flags a user would give, and handles on its insides.
type agent struct {
	*agenttest.Agent
	db     *statedb.DB
	routes statedb.RWTable[*Route]
	rec    reconciler.Reconciler[*Route]
	kernel *kernel
	socket string // the shell's socket
}

// startAgent starts the agent with flags added to the test's own. It
// listens on a free port of 127.0.0.1. Where no network namespace can be
// had, it skips the test (fails it under CI).
func startAgent(t *testing.T, flags ...string) *agent {
	t.Helper()
	nstest.New(t).Close() // skip or fail here, saying why, if the agent could not start
	a := &agent{socket: t.TempDir() + "/shell.sock"}
	var srv *agentkit.Server
	h := newHive(cell.Invoke(func(s *agentkit.Server, db *statedb.DB, routes statedb.RWTable[*Route], rec reconciler.Reconciler[*Route], k *kernel) {
		srv, a.db, a.routes, a.rec, a.kernel = s, db, routes, rec, k
	}))
	args := append([]string{
		"--shell-sock-path", a.socket,
		"--http-addr", "127.0.0.1:0",
		"--full-reconciliation-interval", fullInterval.String(),
	}, flags...)
	a.Agent = agenttest.Start(t, h, args, func() *agentkit.Server { return srv })
	return a
}

// settle waits until every change made to the table so far has settled:
// Done, or failed for good.
func (a *agent) settle(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := a.rec.WaitUntilSettled(ctx, a.routes.Revision(a.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
}

// statuses returns every desired route's status, as GET /routes shows it.
func (a *agent) statuses(t *testing.T) map[string]reconciler.Status {
	t.Helper()
	var routes []Route
	body := a.Expect(t, "GET", "/routes", "", http.StatusOK, "")
	if err := json.Unmarshal([]byte(body), &routes); err != nil {
		t.Fatalf("GET /routes: %s in %q", err, body)
	}
	out := map[string]reconciler.Status{}
	for _, r := range routes {
		out[r.Prefix] = r.Status
	}
	return out
}

// inKernel describes the owned routes in the namespace, by prefix: "via
// GATEWAY dev DEVICE", as ip route shows them.
func inKernel(h *netlink.Handle, o netroute.Owner) (map[string]string, error) {
	routes, err := o.List(h)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range routes {
		var parts []string
		if r.Gw != nil {
			parts = append(parts, "via "+r.Gw.String())
		}
		link, err := h.LinkByIndex(r.LinkIndex)
		if err != nil {
			return nil, err
		}
		parts = append(parts, "dev "+link.Attrs().Name)
		out[netroute.Key(&r).String()] = strings.Join(parts, " ")
	}
	return out, nil
}

// kernelMismatch says how the agent's routes in the kernel differ from
// want, or returns nil when they match exactly.
func (a *agent) kernelMismatch(want map[string]string) error {
	have, err := inKernel(a.kernel.handle(), a.kernel.owner)
	if err != nil {
		return err
	}
	if !maps.Equal(have, want) {
		return fmt.Errorf("kernel has %v, want %v", have, want)
	}
	return nil
}

// eventually waits until check passes, looking every 10ms for at most
// 10s. It is for changes made behind the agent's back: the kernel has no
// watch channel for the test to wait on, and the repair comes with the
// next full reconciliation.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	agenttest.Eventually(t, what, 10*time.Second, 10*time.Millisecond, check)
}

// TestEndToEnd runs the agent in its own private namespace, once with
// batches and once with one netlink request per route, and drives it as
// a user would: over HTTP, and with changes made behind its back.
func TestEndToEnd(t *testing.T) {
	for _, mode := range []struct{ name, batch, concurrency string }{
		{"batch", "--batch=true", "--concurrency=1"},
		{"per-route", "--batch=false", "--concurrency=4"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			testEndToEnd(t, startAgent(t, mode.batch, mode.concurrency))
		})
	}
}

func testEndToEnd(t *testing.T, a *agent) {
	// Desired routes are installed and read back from the kernel.
	a.Expect(t, "PUT", "/routes/10.1.0.0/24", `{"gateway": "192.0.2.254"}`, http.StatusCreated, `"kind": "Pending"`)
	a.Expect(t, "PUT", "/routes/10.2.0.0/16", `{"device": "converge0"}`, http.StatusCreated, `"device": "converge0"`)
	a.Expect(t, "PUT", "/routes/2001:db8:1::/48", `{"gateway": "2001:db8::2", "device": "converge0"}`, http.StatusCreated, "")
	a.Expect(t, "PUT", "/routes/0.0.0.0/0", `{"gateway": "192.0.2.1"}`, http.StatusCreated, "")
	a.settle(t)
	want := map[string]string{
		"10.1.0.0/24":     "via 192.0.2.254 dev converge0",
		"10.2.0.0/16":     "dev converge0",
		"2001:db8:1::/48": "via 2001:db8::2 dev converge0",
		"0.0.0.0/0":       "via 192.0.2.1 dev converge0",
	}
	if err := a.kernelMismatch(want); err != nil {
		t.Fatal(err)
	}
	for prefix, s := range a.statuses(t) {
		if s.Kind != reconciler.StatusKindDone {
			t.Fatalf("%s: %s, want Done", prefix, s)
		}
	}

	// A change replaces the route; putting the same route again is a 200
	// that changes nothing; a delete removes it.
	a.Expect(t, "PUT", "/routes/10.1.0.0/24", `{"gateway": "192.0.2.253"}`, http.StatusOK, `"gateway": "192.0.2.253"`)
	a.Expect(t, "PUT", "/routes/10.2.0.0/16", `{"device": "converge0"}`, http.StatusOK, `"kind": "Done"`)
	a.Expect(t, "DELETE", "/routes/0.0.0.0/0", "", http.StatusNoContent, "")
	a.settle(t)
	want["10.1.0.0/24"] = "via 192.0.2.253 dev converge0"
	delete(want, "0.0.0.0/0")
	if err := a.kernelMismatch(want); err != nil {
		t.Fatal(err)
	}

	// want is what the kernel should hold from here on; the subtests
	// keep it up to date.
	t.Run("bad requests change nothing", func(t *testing.T) { testBadRequests(t, a, want) })
	t.Run("invalid routes fail alone", func(t *testing.T) { testInvalidRoutes(t, a, want) })
	t.Run("drift is repaired and strays pruned", func(t *testing.T) { testDrift(t, a, want) })
	t.Run("metrics", func(t *testing.T) { testMetrics(t, a) })
	t.Run("shell", func(t *testing.T) { testShell(t, a) })
}

// TestExistingNamespace runs the agent in a namespace it did not create
// (--netns), beside routes that are not its own: it prunes only its own,
// and once stopped it leaves the kernel alone.
func TestExistingNamespace(t *testing.T) {
	ns := nstest.New(t)
	link, err := ns.AddDummy("eth0", netip.MustParsePrefix("198.51.100.1/24"))
	if err != nil {
		t.Fatal(err)
	}
	owner := netroute.Owner{Table: 100, Protocol: 201}
	route := func(prefix string, table int, proto netlink.RouteProtocol) *netlink.Route {
		return &netlink.Route{
			Dst:       netroute.IPNet(netip.MustParsePrefix(prefix)),
			Gw:        net.ParseIP("198.51.100.254"),
			LinkIndex: link.Attrs().Index,
			Table:     table,
			Protocol:  proto,
		}
	}
	// Left by an earlier run: the agent's, and nobody desires it now.
	stray := route("10.99.0.0/24", owner.Table, owner.Protocol)
	// Not the agent's: in the main table, and of another protocol in its
	// table. (A desired prefix would replace the latter: the kernel keeps
	// one route per prefix, table and metric, whatever the protocol.)
	foreign := []*netlink.Route{
		route("10.1.0.0/24", unix.RT_TABLE_MAIN, owner.Protocol),
		route("10.3.0.0/24", owner.Table, unix.RTPROT_STATIC),
	}
	for _, r := range append([]*netlink.Route{stray}, foreign...) {
		if err := ns.Handle.RouteAdd(r); err != nil {
			t.Fatal(err)
		}
	}
	all := func() []string {
		routes, err := ns.Handle.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range routes {
			if r.Protocol == unix.RTPROT_KERNEL {
				continue // the device's subnet, local and multicast routes
			}
			out = append(out, fmt.Sprintf("%s table %d proto %d gw %s", netroute.Key(&r), r.Table, r.Protocol, r.Gw))
		}
		slices.Sort(out)
		return out
	}

	// Goroutines running now are the test's; whatever the agent starts
	// must be gone once it stops.
	ignore := goleak.IgnoreCurrent()
	a := startAgent(t, "--netns", ns.Path(), "--table", "100", "--protocol", "201")
	a.Expect(t, "PUT", "/routes/10.1.0.0/24", `{"gateway": "198.51.100.253"}`, http.StatusCreated, "")
	a.Expect(t, "PUT", "/routes/10.2.0.0/24", `{"device": "eth0"}`, http.StatusCreated, "")
	a.settle(t)
	want := map[string]string{"10.1.0.0/24": "via 198.51.100.253 dev eth0", "10.2.0.0/24": "dev eth0"}
	eventually(t, "prune of the stray", func() error { return a.kernelMismatch(want) })
	before := all()
	if want := []string{
		"10.1.0.0/24 table 100 proto 201 gw 198.51.100.253",
		"10.1.0.0/24 table 254 proto 201 gw 198.51.100.254", // foreign: the main table
		"10.2.0.0/24 table 100 proto 201 gw <nil>",
		"10.3.0.0/24 table 100 proto 4 gw 198.51.100.254", // foreign: another protocol
	}; !slices.Equal(before, want) {
		t.Fatalf("routes in the namespace:\n%v\nwant\n%v", strings.Join(before, "\n"), strings.Join(want, "\n"))
	}

	// Stopped, the agent leaves its routes in place (they are the
	// namespace owner's now), and nothing of it runs any more: a route
	// deleted afterwards stays deleted.
	a.Stop()
	if err := goleak.Find(ignore); err != nil {
		t.Fatalf("the agent left goroutines running: %v", err)
	}
	if after := all(); !slices.Equal(after, before) {
		t.Fatalf("stopping changed the routes:\n%v\nto\n%v", before, after)
	}
	mine := &netlink.Route{Dst: netroute.IPNet(netip.MustParsePrefix("10.1.0.0/24")), Scope: netlink.SCOPE_NOWHERE}
	owner.Own(mine)
	if err := ns.Handle.RouteDel(mine); err != nil {
		t.Fatal(err)
	}
	if after := all(); len(after) != len(before)-1 {
		t.Fatalf("after deleting one of %d routes: %v", len(before), after)
	}
}
