package reconciler_test

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	statedbindex "github.com/cilium/statedb/index"

	"github.com/converge-go/converge/index"
	"github.com/converge-go/converge/reconciler"
)

// Route is a desired object: a destination and its gateway, with the
// reconciliation status embedded.
type Route struct {
	Dest, Via string
	Status    reconciler.Status
}

func (r *Route) TableHeader() []string { return []string{"Dest", "Via", "Status"} }
func (r *Route) TableRow() []string    { return []string{r.Dest, r.Via, r.Status.Kind.String()} }

var (
	routeByDest = statedb.Index[*Route, string]{
		Name:       "dest",
		FromObject: func(r *Route) statedbindex.KeySet { return statedbindex.NewKeySet(statedbindex.String(r.Dest)) },
		FromKey:    statedbindex.String,
		Unique:     true,
	}
	routeStatus = index.NewStatusIndex("status", func(r *Route) reconciler.Status { return r.Status })
)

// kernel stands in for the real target: a routing table.
type kernel struct {
	mu     sync.Mutex
	routes map[string]string
}

func (k *kernel) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, r *Route) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.routes[r.Dest] = r.Via
	return nil
}

func (k *kernel) Delete(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, r *Route) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.routes, r.Dest)
	return nil
}

func (k *kernel) Prune(_ context.Context, _ statedb.ReadTxn, desired iter.Seq2[*Route, statedb.Revision]) error {
	keep := map[string]bool{}
	for r := range desired {
		keep[r.Dest] = true
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	maps.DeleteFunc(k.routes, func(dest, _ string) bool { return !keep[dest] })
	return nil
}

// Example shows a complete program: a table of routes with an initializer
// (the reconciler prunes nothing until the initial set is in), a
// reconciler that keeps a (fake) kernel in sync with it, and a test-style
// wait until the routes are in. example/quickstart is the same as a
// main package.
func Example() {
	k := &kernel{routes: map[string]string{}}
	var (
		db          *statedb.DB
		routes      statedb.RWTable[*Route]
		initialized func(statedb.WriteTxn)
	)
	h := hive.New(
		statedb.Cell, job.Cell, reconciler.Cell,
		cell.Provide(func() cell.Health { h, _ := cell.NewSimpleHealth(); return h }),
		cell.Module("routes", "Routes",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db_ *statedb.DB, p reconciler.Params) (err error) {
				db = db_
				if routes, err = statedb.NewTable(db, "routes", routeByDest, routeStatus); err != nil {
					return err
				}
				// Nothing is pruned until the initial routes are in.
				wtxn := db.WriteTxn(routes)
				initialized = routes.RegisterInitializer(wtxn, "initial-routes")
				wtxn.Commit()
				return reconciler.Register(reconciler.Config[*Route]{
					Table:           routes,
					GetObjectStatus: func(r *Route) reconciler.Status { return r.Status },
					SetObjectStatus: func(r *Route, s reconciler.Status) *Route { r.Status = s; return r },
					CloneObject:     func(r *Route) *Route { c := *r; return &c },
					Operations:      k,
				}, p)
			}),
		),
	)
	log := slog.New(slog.DiscardHandler)
	if err := h.Start(log, context.Background()); err != nil {
		panic(err)
	}
	defer h.Stop(log, context.Background())

	// Desire two routes: the initial set, so the table is initialized.
	wtxn := db.WriteTxn(routes)
	routes.Insert(wtxn, &Route{Dest: "10.0.0.0/8", Via: "192.168.1.1", Status: reconciler.StatusPending()})
	routes.Insert(wtxn, &Route{Dest: "10.1.0.0/16", Via: "192.168.1.2", Status: reconciler.StatusPending()})
	initialized(wtxn)
	wtxn.Commit()

	// Wait until they are Done, then look at the kernel.
	if err := reconciler.WaitForReconciliation(context.Background(), db, routes, routeStatus); err != nil {
		panic(err)
	}
	k.mu.Lock()
	for _, dest := range slices.Sorted(maps.Keys(k.routes)) {
		fmt.Println(dest, "via", k.routes[dest])
	}
	k.mu.Unlock()
	// Output:
	// 10.0.0.0/8 via 192.168.1.1
	// 10.1.0.0/16 via 192.168.1.2
}
