package main

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/converge-go/converge/internal/netroute"
	"github.com/converge-go/converge/reconciler"
)

// testBadRequests: every bad request gets a 4xx that says what is wrong,
// and changes neither the table nor the kernel.
func testBadRequests(t *testing.T, a *agent, want map[string]string) {
	before := a.routes.Revision(a.db.ReadTxn())
	gw := `{"gateway": "192.0.2.254"}`
	for _, c := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"PUT", "/routes/10.9.0.0", gw, 400, `malformed prefix \"10.9.0.0\"`},
		{"PUT", "/routes/10.9.0.1/24", gw, 400, "did you mean 10.9.0.0/24?"},
		{"PUT", "/routes/10.9.0.0/33", gw, 400, "malformed prefix"},
		{"PUT", "/routes/2001:DB8:9::/48", `{"device": "converge0"}`, 400, "write 2001:db8:9::/48"},
		{"PUT", "/routes/10.9.0.0/24", `{}`, 400, "needs a gateway, a device, or both"},
		{"PUT", "/routes/10.9.0.0/24", `{"gateway": "2001:db8::2"}`, 400, "not of the family of 10.9.0.0/24"},
		{"PUT", "/routes/10.9.0.0/24", `{"gateway": "192.0.2"}`, 400, `malformed gateway \"192.0.2\"`},
		{"PUT", "/routes/10.9.0.0/24", `{"device": "a/b"}`, 400, `device name \"a/b\"`},
		{"PUT", "/routes/10.9.0.0/24", `{"gw": "192.0.2.254"}`, 400, `unknown field \"gw\"`},
		{"PUT", "/routes/10.9.0.0/24", `{"gateway": `, 400, "bad JSON"},
		{"PUT", "/routes/10.9.0.0/24", "", 400, "empty body"},
		{"PUT", "/routes/10.9.0.0/24", `{"device": "` + strings.Repeat("x", maxBodySize) + `"}`, 413, ""},
		{"GET", "/routes/10.9.0.0/24", "", 404, `no desired route for \"10.9.0.0/24\"`},
		{"DELETE", "/routes/10.9.0.0/24", "", 404, `no desired route for \"10.9.0.0/24\"`},
		{"POST", "/routes", gw, 405, ""},
	} {
		a.Expect(t, c.method, c.path, c.body, c.status, c.want)
	}
	if after := a.routes.Revision(a.db.ReadTxn()); after != before {
		t.Fatalf("the table changed: revision %d, was %d", after, before)
	}
	if err := a.kernelMismatch(want); err != nil {
		t.Fatal(err)
	}
}

// testInvalidRoutes: routes the kernel refuses, and specs that another
// writer of the table got wrong, fail with a Permanent error naming the
// cause, on that route alone, and are not retried.
func testInvalidRoutes(t *testing.T, a *agent, want map[string]string) {
	// Valid to the API, refused by the kernel.
	a.Expect(t, "PUT", "/routes/10.3.0.0/24", `{"gateway": "203.0.113.1"}`, http.StatusCreated, "")
	a.Expect(t, "PUT", "/routes/10.4.0.0/24", `{"device": "nosuch0"}`, http.StatusCreated, "")
	// Invalid, written to the table by another part of the program.
	wtxn := a.db.WriteTxn(a.routes)
	for _, spec := range []RouteSpec{
		{Prefix: "10.5.0.0", Gateway: "192.0.2.254"},
		{Prefix: "10.6.0.0/24", Gateway: "2001:db8::2"},
	} {
		a.routes.Insert(wtxn, &Route{RouteSpec: spec, Status: reconciler.StatusPending()})
	}
	wtxn.Commit()
	// And a good one in the same round, which succeeds.
	a.Expect(t, "PUT", "/routes/10.7.0.0/24", `{"gateway": "192.0.2.254"}`, http.StatusCreated, "")
	a.settle(t)

	failing := map[string]string{
		"10.3.0.0/24": "gateway 203.0.113.1 unreachable",
		"10.4.0.0/24": `device \"nosuch0\" not found`,
		"10.5.0.0":    `malformed prefix \"10.5.0.0\"`,
		"10.6.0.0/24": "not of the family",
	}
	for prefix, why := range failing {
		body := a.Expect(t, "GET", "/routes/"+prefix, "", http.StatusOK, `"kind": "Error"`)
		if !strings.Contains(body, why) {
			t.Errorf("GET /routes/%s: %s, want an error containing %q", prefix, body, why)
		}
	}
	want["10.7.0.0/24"] = "via 192.0.2.254 dev converge0"
	if err := a.kernelMismatch(want); err != nil {
		t.Fatal(err)
	}
	if n := a.rec.Status().Retries; n != 0 {
		t.Errorf("%d retries queued for permanent errors", n)
	}
	health := a.Expect(t, "GET", "/healthz", "", http.StatusServiceUnavailable, "unreachable")
	if !strings.Contains(health, "nosuch0") {
		t.Errorf("/healthz does not name the missing device: %s", health)
	}

	// DELETE takes any key in the table, so that an operator can remove
	// what another writer got wrong.
	for prefix := range failing {
		a.Expect(t, "DELETE", "/routes/"+prefix, "", http.StatusNoContent, "")
	}
	a.settle(t)
	a.Expect(t, "GET", "/healthz", "", http.StatusOK, "ok")
	if err := a.kernelMismatch(want); err != nil {
		t.Fatal(err)
	}
}

// testDrift: changes behind the agent's back to its own routes are
// undone at the next full reconciliation; another protocol's route stays.
func testDrift(t *testing.T, a *agent, want map[string]string) {
	h, o := a.kernel.handle(), a.kernel.owner
	dummy, err := h.LinkByName("converge0")
	if err != nil {
		t.Fatal(err)
	}
	route := func(prefix, gw string) *netlink.Route {
		r := &netlink.Route{Dst: netroute.IPNet(netip.MustParsePrefix(prefix)), Gw: net.ParseIP(gw), LinkIndex: dummy.Attrs().Index}
		o.Own(r)
		return r
	}
	// Behind its back: one route deleted, one changed, one added
	// that nobody desires, and one of another protocol in its table.
	gone := route("10.2.0.0/16", "")
	gone.Scope = netlink.SCOPE_NOWHERE // any scope, as ip route del
	for _, err := range []error{
		h.RouteDel(gone),
		h.RouteReplace(route("10.1.0.0/24", "192.0.2.99")),
		h.RouteReplace(route("10.8.0.0/24", "192.0.2.254")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	foreign := route("10.9.0.0/24", "192.0.2.254")
	foreign.Protocol = unix.RTPROT_STATIC
	if err := h.RouteReplace(foreign); err != nil {
		t.Fatal(err)
	}
	eventually(t, "repair", func() error { return a.kernelMismatch(want) })

	others, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: o.Table, Protocol: unix.RTPROT_STATIC},
		netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
	if err != nil || len(others) != 1 {
		t.Fatalf("the route of another protocol: %v, %v; want it left alone", others, err)
	}
	for prefix, s := range a.statuses(t) {
		if s.Kind != reconciler.StatusKindDone {
			t.Errorf("%s: %s, want Done", prefix, s)
		}
	}
}

// testMetrics: the operator endpoints report on the reconciler.
func testMetrics(t *testing.T, a *agent) {
	a.Expect(t, "GET", "/metrics", "", http.StatusOK,
		`converge_reconciler_operations_total{module_id="routes",name="",op="update",result="ok"}`)
	a.Expect(t, "GET", "/status", "", http.StatusOK, `"table": "desired-routes"`)
}
