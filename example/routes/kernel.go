package main

import (
	"fmt"
	"log/slog"

	"github.com/cilium/hive/cell"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/converge-go/converge/internal/netroute"
)

// kernel is where the routes go: a network namespace, a netlink handle
// and a batching connection bound to it, and the agent's ownership of
// routes there (its table and protocol). It is set up when the hive
// starts, before the reconciler (whose constructor depends on it, so its
// start hook comes first), and torn down when the hive stops.
type kernel struct {
	log   *slog.Logger
	cfg   Config
	owner netroute.Owner

	ns   *netroute.Namespace
	conn *netroute.Conn
	// handles are the per-route operations' netlink handles, one per
	// operation in flight (--concurrency): a handle serves one request
	// at a time, so with one handle more concurrency would only queue.
	handles chan *netlink.Handle
}

func newKernel(lc cell.Lifecycle, log *slog.Logger, cfg Config) *kernel {
	k := &kernel{
		log:   log,
		cfg:   cfg,
		owner: netroute.Owner{Table: cfg.Table, Protocol: netlink.RouteProtocol(cfg.Protocol)},
	}
	lc.Append(cell.Hook{OnStart: k.start, OnStop: k.stop})
	return k
}

// start creates the private namespace with its dummy device, or enters
// the one --netns names. Without the privileges for it, the agent does
// not start, and the error says what is missing.
func (k *kernel) start(cell.HookContext) error {
	var err error
	if k.cfg.Netns == "" {
		err = k.startPrivate()
	} else {
		k.ns, err = netroute.OpenNamespace(k.cfg.Netns)
		if err == nil {
			k.log.Info("Managing routes in an existing network namespace", "netns", k.cfg.Netns,
				"table", k.owner.Table, "protocol", int(k.owner.Protocol))
		}
	}
	if err == nil {
		k.conn, err = k.ns.OpenConn()
	}
	if err == nil {
		err = k.openHandles()
	}
	if err != nil {
		k.stop(nil)
		return err
	}
	return nil
}

func (k *kernel) startPrivate() error {
	ns, err := netroute.NewNamespace()
	if err != nil {
		return fmt.Errorf("%w (or pass --netns to use an existing namespace)", err)
	}
	k.ns = ns
	addrs, _ := k.cfg.deviceAddrs() // validated
	if _, err := ns.AddDummy(k.cfg.Device, addrs...); err != nil {
		return err
	}
	k.log.Info("Managing routes in a private network namespace; they vanish when the agent stops",
		"device", k.cfg.Device, "addrs", k.cfg.DeviceAddrs, "table", k.owner.Table, "protocol", int(k.owner.Protocol))
	return nil
}

// openHandles opens a netlink handle in the namespace for every
// operation that may be in flight.
func (k *kernel) openHandles() error {
	k.handles = make(chan *netlink.Handle, k.cfg.Concurrency)
	for range k.cfg.Concurrency {
		var h *netlink.Handle
		if err := k.ns.Do(func() (err error) { h, err = netlink.NewHandle(unix.NETLINK_ROUTE); return err }); err != nil {
			return fmt.Errorf("netlink socket: %w", err)
		}
		k.handles <- h
	}
	return nil
}

// withHandle runs fn with a netlink handle that no other operation uses
// meanwhile.
func (k *kernel) withHandle(fn func(*netlink.Handle) error) error {
	h := <-k.handles
	defer func() { k.handles <- h }()
	return fn(h)
}

func (k *kernel) stop(cell.HookContext) error {
	for len(k.handles) > 0 {
		(<-k.handles).Close()
	}
	if k.conn != nil {
		k.conn.Close()
	}
	if k.ns != nil {
		return k.ns.Close()
	}
	return nil
}

// handle is the namespace's shared netlink handle, for lookups and
// Prune (which never runs beside an operation).
func (k *kernel) handle() *netlink.Handle { return k.ns.Handle }
