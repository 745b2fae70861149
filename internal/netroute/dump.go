package netroute

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// errDumpInterrupted is a dump the kernel flagged as inconsistent: the
// routes changed while it ran.
var errDumpInterrupted = errors.New("netroute: route dump interrupted by a change")

// List dumps the owner's routes of both IP families. It is Owner.List
// for many routes: the netlink library parses every attribute of every
// route into a large struct, where List reads only what Key and Diff
// use (destination, gateway, device, table, protocol, scope, type,
// priority, TOS), about ten times faster at 100k routes. Multipath
// routes come without their next hops.
func (c *Conn) List(o Owner) ([]netlink.Route, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	for range dumpAttempts {
		var routes []netlink.Route
		routes, err = c.dump(o)
		if !errors.Is(err, errDumpInterrupted) {
			return routes, err
		}
	}
	return nil, err
}

// dump sends one RTM_GETROUTE dump request and reads the answers until
// its end.
func (c *Conn) dump(o Owner) ([]netlink.Route, error) {
	c.seq++
	seq := c.seq
	req := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+unix.SizeofRtMsg)
	req = append(req, make([]byte, unix.SizeofRtMsg)...) // family AF_UNSPEC: both
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.RTM_GETROUTE)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], seq)
	if err := unix.Sendto(c.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("netlink send: %w", err)
	}
	// Room for as many routes as the last dump had: a netlink.Route is
	// large, and growing the slice from nothing copies it over and over.
	routes := make([]netlink.Route, 0, c.lastDump)
	defer func() { c.lastDump = len(routes) }()
	interrupted := false
	for {
		n, _, err := unix.Recvfrom(c.fd, c.rbuf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			c.drain()
			return nil, fmt.Errorf("netlink receive: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(c.rbuf[:n])
		if err != nil {
			c.drain()
			return nil, err
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue // a late answer to an earlier request
			}
			interrupted = interrupted || m.Header.Flags&unix.NLM_F_DUMP_INTR != 0
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				if interrupted {
					return nil, errDumpInterrupted
				}
				return routes, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if errno := int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
						c.drain()
						return nil, fmt.Errorf("route dump: %w", syscall.Errno(-errno))
					}
				}
			case unix.RTM_NEWROUTE:
				if r, ok := parseRoute(m.Data, o); ok {
					routes = append(routes, r)
				}
			}
		}
	}
}

// parseRoute parses an RTM_NEWROUTE message's body, and reports whether
// the route is the owner's.
func parseRoute(b []byte, o Owner) (netlink.Route, bool) {
	var r netlink.Route
	if len(b) < unix.SizeofRtMsg {
		return r, false
	}
	r.Family = int(b[0])
	dstLen := int(b[1])
	r.Tos = int(b[3])
	r.Table = int(b[4])
	r.Protocol = netlink.RouteProtocol(b[5])
	r.Scope = netlink.Scope(b[6])
	r.Type = int(b[7])
	if r.Protocol != o.Protocol {
		return r, false
	}
	for a := b[unix.SizeofRtMsg:]; len(a) >= unix.SizeofRtAttr; {
		l := int(binary.NativeEndian.Uint16(a))
		if l < unix.SizeofRtAttr || l > len(a) {
			break
		}
		typ, v := binary.NativeEndian.Uint16(a[2:]), a[unix.SizeofRtAttr:l]
		switch {
		case typ == unix.RTA_TABLE && len(v) == 4:
			r.Table = int(binary.NativeEndian.Uint32(v))
		case typ == unix.RTA_DST:
			r.Dst = &net.IPNet{IP: net.IP(append([]byte(nil), v...)), Mask: net.CIDRMask(dstLen, len(v)*8)}
		case typ == unix.RTA_GATEWAY:
			r.Gw = net.IP(append([]byte(nil), v...))
		case typ == unix.RTA_OIF && len(v) == 4:
			r.LinkIndex = int(binary.NativeEndian.Uint32(v))
		case typ == unix.RTA_PRIORITY && len(v) == 4:
			r.Priority = int(binary.NativeEndian.Uint32(v))
		}
		a = a[min(align(l), len(a)):]
	}
	return r, r.Table == o.Table
}
