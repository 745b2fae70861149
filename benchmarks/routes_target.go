package main

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net"
	"net/netip"

	"github.com/cilium/statedb"
	sdbrec "github.com/cilium/statedb/reconciler"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/converge-go/converge/internal/netroute"
	"github.com/converge-go/converge/reconciler"
)

// routeOwner is the table and protocol of the benchmark's routes.
var routeOwner = netroute.Owner{Table: 100, Protocol: 201}

// routeGateway is every route's gateway, in the subnet of the dummy
// device (routeDeviceAddr).
var (
	routeGateway    = net.ParseIP("192.0.2.254")
	routeDeviceAddr = netip.MustParsePrefix("192.0.2.1/24")
)

// routeTarget is the kernel of one routes run: a fresh private network
// namespace with a dummy device, netlink handles into it, and the
// operations both reconcilers run on it. Object id is the route to
// 10.0.0.0/8 + id, /32, via routeGateway.
type routeTarget struct {
	ns   *netroute.Namespace
	link int
	// handles are the netlink handles the per-route operations take
	// turns with: one per operation in flight, as a handle serves one
	// request at a time.
	handles chan *netlink.Handle
	conn    *netroute.Conn // the batch operations' connection, and Prune's dumps
	harness *netroute.Conn // the benchmark's own, for drift
	batch   bool           // Prune applies with conn rather than per route

	pruned chan struct{} // gets a value after every Prune
}

// newRouteTarget creates the namespace, its device, concurrency handles
// and the connections.
func newRouteTarget(concurrency int, batch bool) (_ *routeTarget, err error) {
	ns, err := netroute.NewNamespace()
	if err != nil {
		return nil, err
	}
	t := &routeTarget{ns: ns, batch: batch, handles: make(chan *netlink.Handle, concurrency), pruned: make(chan struct{}, 1)}
	defer func() {
		if err != nil {
			t.close()
		}
	}()
	link, err := ns.AddDummy("bench0", routeDeviceAddr)
	if err != nil {
		return nil, err
	}
	t.link = link.Attrs().Index
	for range concurrency {
		var h *netlink.Handle
		if err := ns.Do(func() (err error) { h, err = netlink.NewHandle(unix.NETLINK_ROUTE); return err }); err != nil {
			return nil, err
		}
		t.handles <- h
	}
	if t.conn, err = ns.OpenConn(); err != nil {
		return nil, err
	}
	if t.harness, err = ns.OpenConn(); err != nil {
		return nil, err
	}
	return t, nil
}

// close closes everything; the namespace and its routes go with it. It
// deletes the device first, which deletes its routes before close
// returns: a namespace's teardown runs later in a kernel worker, under
// the lock that route changes take, and would slow down the next run.
func (t *routeTarget) close() {
	if t.link != 0 {
		if link, err := t.ns.Handle.LinkByIndex(t.link); err == nil {
			t.ns.Handle.LinkDel(link)
		}
	}
	for len(t.handles) > 0 {
		(<-t.handles).Close()
	}
	for _, c := range []*netroute.Conn{t.conn, t.harness} {
		if c != nil {
			c.Close()
		}
	}
	t.ns.Close()
}

// route is object id's route.
func (t *routeTarget) route(id uint64) *netlink.Route {
	a := netip.AddrFrom4([4]byte{10, byte(id >> 16), byte(id >> 8), byte(id)})
	r := &netlink.Route{Dst: netroute.IPNet(netip.PrefixFrom(a, 32)), Gw: routeGateway, LinkIndex: t.link}
	routeOwner.Own(r)
	return r
}

// update is ip route replace of id's route.
func (t *routeTarget) update(id uint64) error {
	h := <-t.handles
	defer func() { t.handles <- h }()
	return h.RouteReplace(t.route(id))
}

// delete is ip route del of id's route; one already gone is fine.
func (t *routeTarget) delete(id uint64) error {
	r := t.route(id)
	r.Scope = netlink.SCOPE_NOWHERE
	h := <-t.handles
	defer func() { t.handles <- h }()
	if err := h.RouteDel(r); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}

// prune makes the owned routes in the kernel exactly the desired ids'.
func (t *routeTarget) prune(ctx context.Context, ids iter.Seq[uint64]) error {
	want := map[netip.Prefix]*netlink.Route{}
	for id := range ids {
		r := t.route(id)
		want[netroute.Key(r)] = r
	}
	var apply netroute.Applier = t.conn
	if !t.batch {
		h := <-t.handles
		defer func() { t.handles <- h }()
		apply = netroute.PerRoute{Handle: h}
	}
	list := func() ([]netlink.Route, error) { return t.conn.List(routeOwner) }
	_, err := netroute.Sync(ctx, list, want, func(netip.Prefix) bool { return true }, apply)
	select {
	case t.pruned <- struct{}{}:
	default:
	}
	return err
}

// replaceBatch is Conn.Replace of the ids' routes; errs[i] gets id i's
// error.
func (t *routeTarget) replaceBatch(ctx context.Context, ids []uint64, errs []error) {
	routes := make([]*netlink.Route, len(ids))
	for i, id := range ids {
		routes[i] = t.route(id)
	}
	t.conn.Replace(ctx, routes, errs)
}

// deleteBatch is Conn.Delete of the ids' routes over c; errs[i] gets id
// i's error, nil when the route was already gone.
func (t *routeTarget) deleteBatch(ctx context.Context, c *netroute.Conn, ids []uint64, errs []error) {
	routes := make([]*netlink.Route, len(ids))
	for i, id := range ids {
		routes[i] = t.route(id)
		routes[i].Scope = netlink.SCOPE_NOWHERE
	}
	c.Delete(ctx, routes, errs)
	for i, err := range errs {
		if errors.Is(err, unix.ESRCH) {
			errs[i] = nil
		}
	}
}

// deleteBehindItsBack deletes the routes of ids with the benchmark's own
// connection, as an operator or another program would.
func (t *routeTarget) deleteBehindItsBack(ctx context.Context, ids []uint64) error {
	errs := make([]error, len(ids))
	t.deleteBatch(ctx, t.harness, ids, errs)
	return errors.Join(errs...)
}

// verify lists the owned routes and checks that they are exactly the
// routes of ids [0, n).
func (t *routeTarget) verify(n int) error {
	have, err := t.harness.List(routeOwner)
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	if len(have) != n {
		return fmt.Errorf("%d routes in the kernel, want %d", len(have), n)
	}
	for i := range have {
		k := netroute.Key(&have[i]).Addr().As4()
		if id := int(k[1])<<16 | int(k[2])<<8 | int(k[3]); k[0] != 10 || id >= n {
			return fmt.Errorf("unexpected route %s in the kernel", netroute.Key(&have[i]))
		}
	}
	return nil
}

// objectIDs is the IDs of a Prune's desired objects, of either side.
func objectIDs[Obj interface{ id() uint64 }](objs iter.Seq2[Obj, statedb.Revision]) iter.Seq[uint64] {
	return func(yield func(uint64) bool) {
		for obj := range objs {
			if !yield(obj.id()) {
				return
			}
		}
	}
}

// batchIDs returns the IDs of a batch of n entries, id(i) the i-th's, and
// room for their results.
func batchIDs(n int, id func(int) uint64) ([]uint64, []error) {
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = id(i)
	}
	return ids, make([]error, n)
}

// convergeRouteOps are the target's operations for converge; with batch
// set, it is BatchOperations too.
type convergeRouteOps struct{ t *routeTarget }

func (o convergeRouteOps) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *convergeObject) error {
	return o.t.update(obj.ID)
}

func (o convergeRouteOps) Delete(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *convergeObject) error {
	return o.t.delete(obj.ID)
}

func (o convergeRouteOps) Prune(ctx context.Context, _ statedb.ReadTxn, objs iter.Seq2[*convergeObject, statedb.Revision]) error {
	return o.t.prune(ctx, objectIDs(objs))
}

func (o convergeRouteOps) UpdateBatch(ctx context.Context, _ statedb.ReadTxn, batch []reconciler.BatchEntry[*convergeObject]) {
	ids, errs := batchIDs(len(batch), func(i int) uint64 { return batch[i].Object.ID })
	o.t.replaceBatch(ctx, ids, errs)
	for i := range batch {
		batch[i].Result = errs[i]
	}
}

func (o convergeRouteOps) DeleteBatch(ctx context.Context, _ statedb.ReadTxn, batch []reconciler.BatchEntry[*convergeObject]) {
	ids, errs := batchIDs(len(batch), func(i int) uint64 { return batch[i].Object.ID })
	o.t.deleteBatch(ctx, o.t.conn, ids, errs)
	for i := range batch {
		batch[i].Result = errs[i]
	}
}

// statedbRouteOps are the same operations for statedb's reconciler, and
// its BatchOperations in the statedb-batch reference runs.
type statedbRouteOps struct{ t *routeTarget }

func (o statedbRouteOps) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *statedbObject) error {
	return o.t.update(obj.ID)
}

func (o statedbRouteOps) Delete(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *statedbObject) error {
	return o.t.delete(obj.ID)
}

func (o statedbRouteOps) Prune(ctx context.Context, _ statedb.ReadTxn, objs iter.Seq2[*statedbObject, statedb.Revision]) error {
	return o.t.prune(ctx, objectIDs(objs))
}

func (o statedbRouteOps) UpdateBatch(ctx context.Context, _ statedb.ReadTxn, batch []sdbrec.BatchEntry[*statedbObject]) {
	ids, errs := batchIDs(len(batch), func(i int) uint64 { return batch[i].Object.ID })
	o.t.replaceBatch(ctx, ids, errs)
	for i := range batch {
		batch[i].Result = errs[i]
	}
}

func (o statedbRouteOps) DeleteBatch(ctx context.Context, _ statedb.ReadTxn, batch []sdbrec.BatchEntry[*statedbObject]) {
	ids, errs := batchIDs(len(batch), func(i int) uint64 { return batch[i].Object.ID })
	o.t.deleteBatch(ctx, o.t.conn, ids, errs)
	for i := range batch {
		batch[i].Result = errs[i]
	}
}

var (
	_ reconciler.Operations[*convergeObject]      = convergeRouteOps{}
	_ reconciler.BatchOperations[*convergeObject] = convergeRouteOps{}
	_ sdbrec.Operations[*statedbObject]           = statedbRouteOps{}
	_ sdbrec.BatchOperations[*statedbObject]      = statedbRouteOps{}
)
