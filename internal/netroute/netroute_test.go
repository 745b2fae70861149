package netroute_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/converge-go/converge/internal/netroute"
	"github.com/converge-go/converge/internal/netroute/nstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var owner = netroute.Owner{Table: 100, Protocol: 201}

// setup returns a namespace with a dummy device on 192.0.2.1/24 and
// 2001:db8::1/64, and a Conn in it.
func setup(t *testing.T) (*netroute.Namespace, netlink.Link, *netroute.Conn) {
	ns := nstest.New(t)
	link, err := ns.AddDummy("dummy0", netip.MustParsePrefix("192.0.2.1/24"), netip.MustParsePrefix("2001:db8::1/64"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ns.OpenConn()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return ns, link, c
}

func route(prefix, gw string, link int) *netlink.Route {
	r := &netlink.Route{Dst: netroute.IPNet(netip.MustParsePrefix(prefix)), LinkIndex: link}
	if gw != "" {
		r.Gw = net.ParseIP(gw)
	} else {
		r.Scope = netlink.SCOPE_LINK
	}
	owner.Own(r)
	return r
}

func TestConnReplaceAndDelete(t *testing.T) {
	ns, link, c := setup(t)
	var routes []*netlink.Route
	// More than two chunks, so that answers are mapped back across chunks.
	for i := range 2*netroute.ChunkSize + 10 {
		routes = append(routes, route(fmt.Sprintf("10.%d.%d.0/24", i/256, i%256), "192.0.2.254", 0))
	}
	bad := map[int]error{
		3:                      unix.ENETUNREACH, // gateway in no subnet of ours
		netroute.ChunkSize - 1: unix.ENODEV,      // the last of a chunk: its error ends the chunk
		netroute.ChunkSize + 7: nil,              // no destination: refused before sending
	}
	routes[3] = route("10.200.0.0/24", "203.0.113.1", 0)
	routes[netroute.ChunkSize-1] = route("10.201.0.0/24", "", 9999)
	routes[netroute.ChunkSize+7] = &netlink.Route{Gw: net.ParseIP("192.0.2.254")}
	routes = append(routes, route("2001:db8:1::/48", "2001:db8::2", link.Attrs().Index), route("10.202.0.0/16", "", link.Attrs().Index))

	errs := make([]error, len(routes))
	c.Replace(t.Context(), routes, errs)
	for i, err := range errs {
		want, isBad := bad[i]
		switch {
		case !isBad && err != nil:
			t.Errorf("route %d (%v): %v", i, routes[i].Dst, err)
		case isBad && err == nil:
			t.Errorf("route %d (%v): no error", i, routes[i].Dst)
		case isBad && want != nil && !errors.Is(err, want):
			t.Errorf("route %d: %v, want %v", i, err, want)
		}
	}
	have, err := owner.List(ns.Handle)
	if err != nil {
		t.Fatal(err)
	}
	if len(have) != len(routes)-len(bad) {
		t.Fatalf("%d routes in the kernel, want %d", len(have), len(routes)-len(bad))
	}

	// Replacing again changes nothing and fails nothing.
	c.Replace(t.Context(), routes[:10], errs[:10])
	for i, err := range errs[:10] {
		if _, isBad := bad[i]; !isBad && err != nil {
			t.Errorf("second replace of %d: %v", i, err)
		}
	}

	// Deleting: those never installed fail with ESRCH.
	c.Delete(t.Context(), routes, errs)
	for i, err := range errs {
		if _, isBad := bad[i]; isBad != (err != nil) {
			t.Errorf("delete %d (%v): %v", i, routes[i].Dst, err)
		}
	}
	if have, err := owner.List(ns.Handle); err != nil || len(have) != 0 {
		t.Fatalf("after delete: %d routes, %v", len(have), err)
	}
}

// Routes of another protocol in the same table are not the owner's: List
// does not see them and Delete does not remove them.
func TestOwnerLeavesOthersAlone(t *testing.T) {
	ns, link, c := setup(t)
	foreign := route("10.9.0.0/16", "", link.Attrs().Index)
	foreign.Protocol = unix.RTPROT_STATIC
	if err := ns.Handle.RouteReplace(foreign); err != nil {
		t.Fatal(err)
	}
	mine := route("10.9.0.0/16", "", link.Attrs().Index)
	errs := make([]error, 1)
	c.Delete(t.Context(), []*netlink.Route{mine}, errs)
	if !errors.Is(errs[0], unix.ESRCH) {
		t.Fatalf("delete of a route of another protocol: %v, want ESRCH", errs[0])
	}
	if have, err := owner.List(ns.Handle); err != nil || len(have) != 0 {
		t.Fatalf("List: %v, %v; want none", have, err)
	}
	all, err := ns.Handle.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: owner.Table}, netlink.RT_FILTER_TABLE)
	if err != nil || len(all) != 1 {
		t.Fatalf("the foreign route: %v, %v", all, err)
	}
}

func TestDiff(t *testing.T) {
	have := []netlink.Route{
		*route("10.0.0.0/24", "192.0.2.254", 2), // matches
		*route("10.0.1.0/24", "192.0.2.253", 2), // other gateway
		*route("10.0.2.0/24", "192.0.2.254", 2), // not desired
		*route("10.0.3.0/24", "192.0.2.254", 2), // other priority
		*route("2001:db8:1::/48", "", 2),        // matches: the kernel's default IPv6 metric
	}
	have[len(have)-1].Priority = 1024
	want := map[netip.Prefix]*netlink.Route{}
	for _, r := range []*netlink.Route{
		route("10.0.0.0/24", "192.0.2.254", 0),
		route("10.0.1.0/24", "192.0.2.254", 0),
		route("10.0.3.0/24", "192.0.2.254", 0),
		route("10.0.4.0/24", "192.0.2.254", 0), // missing
		route("2001:db8:1::/48", "", 2),
	} {
		want[netroute.Key(r)] = r
	}
	want[netip.MustParsePrefix("10.0.3.0/24")].Priority = 5
	replace, remove := netroute.Diff(have, want)
	keys := func(rs []*netlink.Route) map[string]bool {
		m := map[string]bool{}
		for _, r := range rs {
			m[netroute.Key(r).String()] = true
		}
		return m
	}
	if got := keys(replace); len(got) != 3 || !got["10.0.1.0/24"] || !got["10.0.3.0/24"] || !got["10.0.4.0/24"] {
		t.Errorf("replace %v", got)
	}
	if got := keys(remove); len(got) != 2 || !got["10.0.2.0/24"] || !got["10.0.3.0/24"] {
		t.Errorf("remove %v", got)
	}
}

// Conn.List sees what Owner.List sees, through the netlink library: the
// owner's routes of both families with the fields Diff and Key use, and
// no route of another table or protocol.
func TestConnList(t *testing.T) {
	ns, link, c := setup(t)
	idx := link.Attrs().Index
	mine := []*netlink.Route{
		route("10.1.0.0/24", "192.0.2.254", 0),
		route("10.2.0.0/16", "", idx),
		route("0.0.0.0/0", "192.0.2.253", idx),
		route("2001:db8:1::/48", "2001:db8::2", idx),
		route("::/0", "", idx),
	}
	mine[0].Priority = 7
	otherProto := route("10.3.0.0/24", "192.0.2.254", 0)
	otherProto.Protocol = unix.RTPROT_STATIC
	otherTable := route("10.4.0.0/24", "192.0.2.254", 0)
	otherTable.Table = 300
	for _, r := range append(mine, otherProto, otherTable) {
		if err := ns.Handle.RouteAdd(r); err != nil {
			t.Fatalf("%v: %v", r, err)
		}
	}
	describe := func(routes []netlink.Route) []string {
		var out []string
		for _, r := range routes {
			out = append(out, fmt.Sprintf("%s gw %s dev %d table %d proto %d scope %d type %d metric %d",
				netroute.Key(&r), r.Gw, r.LinkIndex, r.Table, r.Protocol, r.Scope, r.Type, r.Priority))
		}
		slices.Sort(out)
		return out
	}
	viaLib, err := owner.List(ns.Handle)
	if err != nil {
		t.Fatal(err)
	}
	viaConn, err := c.List(owner)
	if err != nil {
		t.Fatal(err)
	}
	if len(viaConn) != len(mine) || !slices.Equal(describe(viaConn), describe(viaLib)) {
		t.Fatalf("Conn.List:\n%s\nthe netlink library:\n%s",
			strings.Join(describe(viaConn), "\n"), strings.Join(describe(viaLib), "\n"))
	}
	// What Conn.List returns is what Diff needs: nothing to do.
	want := map[netip.Prefix]*netlink.Route{}
	for _, r := range mine {
		want[netroute.Key(r)] = r
	}
	if replace, remove := netroute.Diff(viaConn, want); len(replace)+len(remove) != 0 {
		t.Fatalf("Diff of the listed routes: replace %d, remove %d", len(replace), len(remove))
	}
}
