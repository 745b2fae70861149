// Package netroute is the kernel side of converge's route examples and
// benchmarks: private network namespaces to put routes in without touching
// the host's, the routes a program owns (a table and a protocol of its
// own), and a netlink connection that sends many route changes in one
// system call.
//
// It is internal: example/routes and benchmarks/ share it, and it is not
// part of converge's API.
package netroute

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ErrPrivileges is wrapped by the errors of NewNamespace and
// OpenNamespace when the process may not create or enter a network
// namespace. errors.Is(err, os.ErrPermission) holds for them too.
var ErrPrivileges = errors.New("creating or entering a network namespace needs CAP_SYS_ADMIN, " +
	"and changing its routes CAP_NET_ADMIN: run as root")

// Namespace is a network namespace with a netlink handle bound to it.
// Nothing else in the process moves into it: sockets are opened on a
// throwaway OS thread that switches to the namespace and then exits, so
// no thread of the program is ever left in the wrong namespace, and the
// host's namespace is never changed.
type Namespace struct {
	ns netns.NsHandle
	// Handle sends netlink requests into the namespace. It is safe for
	// concurrent use, one request at a time per socket.
	Handle *netlink.Handle
}

// NewNamespace creates a new, empty network namespace (only a loopback
// device, down) that lives until Close. Its routes vanish with it.
func NewNamespace() (*Namespace, error) {
	n := &Namespace{}
	err := OnThread(func() error {
		ns, err := netns.New() // unshare(CLONE_NEWNET): this thread is now in it
		if err != nil {
			return privileges("create a network namespace", err)
		}
		n.ns = ns
		// Sockets belong to the namespace of the thread that opens them.
		n.Handle, err = netlink.NewHandle(unix.NETLINK_ROUTE)
		return err
	})
	if err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// OpenNamespace opens the existing network namespace at path (for
// example /var/run/netns/NAME, as "ip netns add NAME" creates it, or
// /proc/PID/ns/net). Close does not destroy it.
func OpenNamespace(path string) (*Namespace, error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("network namespace %s: %w", path, err)
	}
	n := &Namespace{ns: ns}
	if err := n.Do(func() (err error) {
		n.Handle, err = netlink.NewHandle(unix.NETLINK_ROUTE)
		return err
	}); err != nil {
		n.Close()
		return nil, fmt.Errorf("network namespace %s: %w", path, err)
	}
	return n, nil
}

// Path is a path that opens the namespace for as long as n is open, for
// OpenNamespace or another program (ip netns exec does not take it, but
// nsenter --net=PATH does).
func (n *Namespace) Path() string {
	return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), int(n.ns))
}

// Do runs fn on an OS thread that is in the namespace, for opening
// sockets in it. The thread is discarded afterwards.
func (n *Namespace) Do(fn func() error) error {
	return OnThread(func() error {
		if err := netns.Set(n.ns); err != nil {
			return privileges("enter the network namespace", err)
		}
		return fn()
	})
}

// AddDummy adds a dummy device named name with the given addresses, and
// sets it up, so that routes via it and via gateways in its subnets can
// be installed. Where the kernel has no dummy driver, the device is one
// end of a veth pair whose other end (name+"p") is up too: to routes it
// is the same. IPv6 addresses skip duplicate address detection, so they
// are usable at once.
func (n *Namespace) AddDummy(name string, addrs ...netip.Prefix) (netlink.Link, error) {
	var link netlink.Link = &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}}
	err := n.Handle.LinkAdd(link)
	if errors.Is(err, unix.EOPNOTSUPP) {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}
		if err = n.Handle.LinkAdd(veth); err == nil {
			link = veth
			err = n.setUp(veth.PeerName)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("add device %s: %w", name, err)
	}
	for _, p := range addrs {
		addr := &netlink.Addr{IPNet: IPNet(p)}
		if p.Addr().Is6() {
			addr.Flags = unix.IFA_F_NODAD
		}
		if err := n.Handle.AddrAdd(link, addr); err != nil {
			return nil, fmt.Errorf("add address %s to %s: %w", p, name, err)
		}
	}
	if err := n.setUp(name); err != nil {
		return nil, err
	}
	return n.Handle.LinkByName(name)
}

func (n *Namespace) setUp(name string) error {
	link, err := n.Handle.LinkByName(name)
	if err == nil {
		err = n.Handle.LinkSetUp(link)
	}
	if err != nil {
		return fmt.Errorf("set %s up: %w", name, err)
	}
	return nil
}

// Close closes the handle and the namespace. A namespace made by
// NewNamespace is destroyed once nothing else holds it.
func (n *Namespace) Close() error {
	if n.Handle != nil {
		n.Handle.Close()
	}
	if n.ns.IsOpen() {
		return n.ns.Close()
	}
	return nil
}

// OnThread runs fn on a new goroutine locked to its OS thread, and never
// unlocks it: when the goroutine ends, the Go runtime terminates the
// thread, whatever namespace fn left it in. Whatever enters a network
// namespace (a netlink socket, a command started by fn) does it here, so
// that no thread of the program stays in the wrong namespace.
func OnThread(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- fn()
	}()
	return <-errc
}

// privileges explains a permission error.
func privileges(what string, err error) error {
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("cannot %s: %w: %w", what, err, ErrPrivileges)
	}
	return fmt.Errorf("cannot %s: %w", what, err)
}

// IPNet converts a prefix to the form netlink takes.
func IPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
