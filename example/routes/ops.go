package main

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/netip"

	"github.com/cilium/statedb"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/converge-go/converge/internal/netroute"
	"github.com/converge-go/converge/reconciler"
)

// routeOps makes the kernel's routes in the agent's table match the
// desired-routes table. It implements reconciler.Operations and, for
// --batch, reconciler.BatchOperations.
//
// Every operation is idempotent: Update replaces (ip route replace),
// Delete treats a route that is already gone as deleted, and Prune looks
// at what the kernel has before it changes anything.
type routeOps struct {
	log *slog.Logger
	k   *kernel
}

var (
	_ reconciler.Operations[*Route]      = (*routeOps)(nil)
	_ reconciler.BatchOperations[*Route] = (*routeOps)(nil)
)

func newRouteOps(log *slog.Logger, k *kernel) *routeOps {
	return &routeOps{log: log, k: k}
}

// Update installs the route, or replaces the route of its prefix in the
// agent's table. An invalid spec, a missing device, or a route the
// kernel refuses (an unreachable gateway) fails with a Permanent error
// that says why: retrying cannot help until the route or the device
// changes. Other kernel errors are retried with backoff. Replacing
// matches the kernel's identity of a route (prefix, table, metric), not
// the protocol: a route of another protocol for the same prefix in the
// agent's table is replaced too.
func (o *routeOps) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, r *Route) error {
	return o.k.withHandle(func(h *netlink.Handle) error {
		kr, err := o.kernelRoute(h, r, nil)
		if err != nil {
			return err
		}
		return kernelError(r, h.RouteReplace(kr))
	})
}

// Delete deletes the route of the prefix from the agent's table, if the
// agent's protocol is on it. A route that is not there (deleted behind
// the agent's back, or never installed because it was invalid) is fine.
func (o *routeOps) Delete(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, r *Route) error {
	kr, ok := o.deletable(r)
	if !ok {
		return nil
	}
	return o.k.withHandle(func(h *netlink.Handle) error { return deleteError(h.RouteDel(kr)) })
}

// UpdateBatch is Update for a round's routes, in a few system calls.
func (o *routeOps) UpdateBatch(ctx context.Context, _ statedb.ReadTxn, batch []reconciler.BatchEntry[*Route]) {
	links := map[string]int{} // one device lookup per name per batch
	routes, idx := make([]*netlink.Route, 0, len(batch)), make([]int, 0, len(batch))
	for i := range batch {
		kr, err := o.kernelRoute(o.k.handle(), batch[i].Object, links)
		if err != nil {
			batch[i].Result = err
			continue
		}
		routes, idx = append(routes, kr), append(idx, i)
	}
	errs := make([]error, len(routes))
	o.k.conn.Replace(ctx, routes, errs)
	for j, i := range idx {
		batch[i].Result = kernelError(batch[i].Object, errs[j])
	}
}

// DeleteBatch is Delete for a round's routes, in a few system calls.
func (o *routeOps) DeleteBatch(ctx context.Context, _ statedb.ReadTxn, batch []reconciler.BatchEntry[*Route]) {
	routes, idx := make([]*netlink.Route, 0, len(batch)), make([]int, 0, len(batch))
	for i := range batch {
		batch[i].Result = nil
		if kr, ok := o.deletable(batch[i].Object); ok {
			routes, idx = append(routes, kr), append(idx, i)
		}
	}
	errs := make([]error, len(routes))
	o.k.conn.Delete(ctx, routes, errs)
	for j, i := range idx {
		batch[i].Result = deleteError(errs[j])
	}
}

// Prune compares the agent's routes in the kernel with objs, the whole
// desired set, and repairs the difference: it deletes the routes of the
// agent's table and protocol that nobody desires, and puts back the
// desired routes that are missing or were changed behind its back (ip
// route del, ip route change), if they are Done: a route that is Pending
// or failing is the reconciler's to Update. Routes of other tables or
// protocols are never looked at. Prune runs at every full
// reconciliation, never beside Update or Delete.
func (o *routeOps) Prune(ctx context.Context, _ statedb.ReadTxn, objs iter.Seq2[*Route, statedb.Revision]) error {
	want := map[netip.Prefix]*netlink.Route{}
	done := map[netip.Prefix]bool{}
	links := map[string]int{}
	for r := range objs {
		p, err := parseRoute(r.RouteSpec)
		if err != nil {
			continue // never installed
		}
		kr, err := o.kernelRoute(o.k.handle(), r, links)
		if err != nil {
			// Its device is gone: keep whatever route the prefix has,
			// and leave the error to the route's status.
			kr = &netlink.Route{Dst: netroute.IPNet(p.prefix), Gw: p.gateway.AsSlice()}
		}
		want[p.prefix] = kr
		done[p.prefix] = err == nil && r.Status.Kind == reconciler.StatusKindDone
	}
	list := func() ([]netlink.Route, error) { return o.k.conn.List(o.k.owner) }
	res, err := netroute.Sync(ctx, list, want,
		func(p netip.Prefix) bool { return done[p] }, o.applier())
	if res.Repaired > 0 || res.Removed > 0 {
		o.log.Info("Repaired the agent's routes in the kernel", "repaired", res.Repaired, "pruned", res.Removed)
	}
	return err
}

// applier is how Prune changes routes: as the incremental operations do.
func (o *routeOps) applier() netroute.Applier {
	if o.k.cfg.Batch {
		return o.k.conn
	}
	return netroute.PerRoute{Handle: o.k.handle()}
}

// kernelRoute is the netlink route of r in the agent's table, with its
// protocol; h looks up its device. links caches device lookups (nil: no
// cache). Errors are Permanent when the spec is invalid or its device
// does not exist.
func (o *routeOps) kernelRoute(h *netlink.Handle, r *Route, links map[string]int) (*netlink.Route, error) {
	p, err := parseRoute(r.RouteSpec)
	if err != nil {
		return nil, reconciler.Permanent(err)
	}
	kr := &netlink.Route{Dst: netroute.IPNet(p.prefix)}
	if p.gateway.IsValid() {
		kr.Gw = p.gateway.AsSlice()
	} else {
		kr.Scope = netlink.SCOPE_LINK // directly on the device, as ip route add ... dev does
	}
	if p.device != "" {
		index, ok := links[p.device]
		if !ok {
			link, err := h.LinkByName(p.device)
			var notFound netlink.LinkNotFoundError
			if errors.As(err, &notFound) {
				return nil, reconciler.Permanent(fmt.Errorf("device %q not found in the agent's network namespace", p.device))
			}
			if err != nil {
				return nil, fmt.Errorf("look up device %q: %w", p.device, err)
			}
			index = link.Attrs().Index
			if links != nil {
				links[p.device] = index
			}
		}
		kr.LinkIndex = index
	}
	o.k.owner.Own(kr)
	return kr, nil
}

// deletable is the route to delete for r: its prefix in the agent's
// table with its protocol, whatever the gateway or device. An invalid
// spec was never installed.
func (o *routeOps) deletable(r *Route) (*netlink.Route, bool) {
	p, err := parseRoute(r.RouteSpec)
	if err != nil {
		return nil, false
	}
	// Scope "nowhere" matches a route of any scope, as ip route del
	// does: the kernel compares any other scope, and 0 (universe) would
	// never match a device route (scope link), which would then stay.
	kr := &netlink.Route{Dst: netroute.IPNet(p.prefix), Scope: netlink.SCOPE_NOWHERE}
	o.k.owner.Own(kr)
	return kr, true
}

// kernelError says why the kernel refused r. Errors that retrying cannot
// fix are Permanent; the rest (out of memory, a busy kernel, a lost
// answer) are retried with backoff.
func kernelError(r *Route, err error) error {
	var errno unix.Errno
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &errno):
		return err
	case errno == unix.ENETUNREACH || errno == unix.EHOSTUNREACH:
		return reconciler.Permanent(fmt.Errorf("gateway %s unreachable: no device has an address in its subnet: %w", r.Gateway, err))
	case errno == unix.ENODEV:
		return reconciler.Permanent(fmt.Errorf("device %q is gone: %w", r.Device, err))
	case errno == unix.EINVAL || errno == unix.ERANGE || errno == unix.EAFNOSUPPORT || errno == unix.EOPNOTSUPP:
		return reconciler.Permanent(fmt.Errorf("the kernel refused the route: %w", err))
	}
	return err
}

// deleteError is nil for a route that is not there.
func deleteError(err error) error {
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}
