package netroute

import (
	"errors"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// Owner says which routes a program owns: those in its routing table
// that carry its routing protocol number. Routes of another table or
// protocol are someone else's (the kernel's, an operator's, a routing
// daemon's) and a program never lists, changes or deletes them.
type Owner struct {
	Table    int
	Protocol netlink.RouteProtocol
}

// dumpAttempts is how often List tries a dump the kernel interrupted
// because the routes changed meanwhile.
const dumpAttempts = 3

// List dumps the owned routes of both IP families.
func (o Owner) List(h *netlink.Handle) ([]netlink.Route, error) {
	var routes []netlink.Route
	err := o.Each(h, func(r *netlink.Route) {
		routes = append(routes, *r)
	})
	return routes, err
}

// Each calls fn with every owned route, without collecting them. The
// route passed to fn is reused afterwards.
func (o Owner) Each(h *netlink.Handle, fn func(*netlink.Route)) error {
	filter := &netlink.Route{Table: o.Table, Protocol: o.Protocol}
	mask := uint64(netlink.RT_FILTER_TABLE | netlink.RT_FILTER_PROTOCOL)
	var err error
	for range dumpAttempts {
		var seen []netlink.Route
		err = h.RouteListFilteredIter(netlink.FAMILY_ALL, filter, mask, func(r netlink.Route) bool {
			seen = append(seen, r)
			return true
		})
		if errors.Is(err, netlink.ErrDumpInterrupted) {
			continue
		}
		if err != nil {
			return err
		}
		for i := range seen {
			fn(&seen[i])
		}
		return nil
	}
	return err
}

// Own sets r's table and protocol to the owner's.
func (o Owner) Own(r *netlink.Route) {
	r.Table, r.Protocol = o.Table, o.Protocol
}

// Key is a route's destination as a prefix: the identity of a route in
// an owner's table. A default route, which the kernel reports without a
// destination, is 0.0.0.0/0 or ::/0.
func Key(r *netlink.Route) netip.Prefix {
	if r.Dst == nil {
		if r.Family == netlink.FAMILY_V6 {
			return netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	addr, ok := netip.AddrFromSlice(r.Dst.IP)
	if !ok {
		return netip.Prefix{}
	}
	ones, _ := r.Dst.Mask.Size()
	return netip.PrefixFrom(addr.Unmap(), ones)
}

// ipv6DefaultPriority is the metric the kernel gives an IPv6 route that
// asks for none (IP6_RT_PRIO_USER); IPv4 routes keep 0.
const ipv6DefaultPriority = 1024

// priority is the priority the kernel gives r.
func priority(r *netlink.Route) int {
	if r.Priority == 0 && Key(r).Addr().Is6() {
		return ipv6DefaultPriority
	}
	return r.Priority
}

// Diff compares the owned routes in the kernel, have, with the desired
// ones, want (by Key). It returns the desired routes that are missing or
// differ in gateway, device or priority, to be replaced, and the owned
// routes that nobody desires, to be deleted. A desired route that names
// no device matches whatever device the kernel chose for its gateway.
func Diff(have []netlink.Route, want map[netip.Prefix]*netlink.Route) (replace, remove []*netlink.Route) {
	ok := make(map[netip.Prefix]bool, len(want))
	for i := range have {
		h := &have[i]
		k := Key(h)
		w := want[k]
		switch {
		case w == nil || priority(w) != h.Priority:
			remove = append(remove, h)
		case h.Gw.Equal(w.Gw) && (w.LinkIndex == 0 || w.LinkIndex == h.LinkIndex):
			ok[k] = true
		}
	}
	for k, w := range want {
		if !ok[k] {
			replace = append(replace, w)
		}
	}
	return replace, remove
}
