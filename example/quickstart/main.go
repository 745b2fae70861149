package main

import (
	"context"
	"fmt"
	"iter"
	"log/slog"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"

	"github.com/converge-go/converge/reconciler"
)

// Route is a desired object. It keeps its reconciliation status in a named field.
type Route struct {
	Dest, Via string
	Status    reconciler.Status
}

// TableHeader and TableRow are how db/show prints routes.
func (r *Route) TableHeader() []string { return []string{"Dest", "Via", "Status"} }
func (r *Route) TableRow() []string    { return []string{r.Dest, r.Via, r.Status.Row()} }

var byDest = statedb.Index[*Route, string]{
	Name:       "dest",
	FromObject: func(r *Route) index.KeySet { return index.NewKeySet(index.String(r.Dest)) },
	FromKey:    index.String,
	Unique:     true,
}

// kernel is the target. A real one would call netlink.
type kernel struct{}

func (kernel) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, r *Route) error {
	fmt.Println("route add", r.Dest, "via", r.Via)
	return nil
}

func (kernel) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *Route) error { return nil }

// Prune is given every desired route; it would delete the kernel's others.
func (kernel) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*Route, statedb.Revision]) error {
	return nil
}

func main() {
	var (
		db          *statedb.DB
		routes      statedb.RWTable[*Route]
		initialized func(statedb.WriteTxn)
		rec         reconciler.Reconciler[*Route]
	)
	h := hive.New(
		statedb.Cell, job.Cell, reconciler.Cell,
		cell.Provide(cell.NewSimpleHealth), // job groups report health to it
		cell.Module("routes", "Routes",
			cell.ProvidePrivate(job.Registry.NewGroup), // the reconciler runs in it
			cell.Invoke(func(d *statedb.DB, p reconciler.Params) (err error) {
				db = d
				if routes, err = statedb.NewTable(db, "routes", byDest); err != nil {
					return err
				}
				// Nothing is pruned until the initial routes are in.
				wtxn := db.WriteTxn(routes)
				initialized = routes.RegisterInitializer(wtxn, "initial-routes")
				wtxn.Commit()
				rec, err = reconciler.New(reconciler.Config[*Route]{
					Table:           routes,
					GetObjectStatus: func(r *Route) reconciler.Status { return r.Status },
					SetObjectStatus: func(r *Route, s reconciler.Status) *Route { r.Status = s; return r },
					CloneObject:     func(r *Route) *Route { c := *r; return &c },
					Operations:      kernel{},
				}, p)
				return err
			}),
		),
	)
	log := slog.New(slog.DiscardHandler)
	if err := h.Start(log, context.Background()); err != nil {
		panic(err)
	}
	defer h.Stop(log, context.Background())

	// Desire a route, and mark the initial set complete.
	wtxn := db.WriteTxn(routes)
	routes.Insert(wtxn, &Route{Dest: "10.0.0.0/8", Via: "192.168.1.1", Status: reconciler.StatusPending()})
	initialized(wtxn)
	rev := routes.Revision(wtxn)
	wtxn.Commit()

	// Wait until it is reconciled, then read its status.
	if err := rec.WaitUntilSettled(context.Background(), rev); err != nil {
		panic(err)
	}
	r, _, _ := routes.Get(db.ReadTxn(), byDest.Query("10.0.0.0/8"))
	fmt.Println(r.Dest, r.Status.Kind)
}
