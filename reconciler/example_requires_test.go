package reconciler_test

import (
	"context"
	"fmt"
	"iter"
	"log/slog"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	statedbindex "github.com/cilium/statedb/index"

	"github.com/converge-go/converge/index"
	"github.com/converge-go/converge/reconciler"
)

// Link is a row of a table that something else writes (a watcher of the
// kernel's links): no reconciler of ours.
type Link struct {
	Name string
	Up   bool
}

func (l *Link) TableHeader() []string { return []string{"Name", "Up"} }
func (l *Link) TableRow() []string    { return []string{l.Name, fmt.Sprint(l.Up)} }

var linkByName = statedb.Index[*Link, string]{
	Name:       "name",
	FromObject: func(l *Link) statedbindex.KeySet { return statedbindex.NewKeySet(statedbindex.String(l.Name)) },
	FromKey:    statedbindex.String,
	Unique:     true,
}

// LinkRoute is a desired route through a link.
type LinkRoute struct {
	Dest, Link string
	Status     reconciler.Status
}

func (r *LinkRoute) TableHeader() []string { return []string{"Dest", "Link", "Status"} }
func (r *LinkRoute) TableRow() []string    { return []string{r.Dest, r.Link, r.Status.Kind.String()} }

var (
	linkRouteByDest = statedb.Index[*LinkRoute, string]{
		Name:       "dest",
		FromObject: func(r *LinkRoute) statedbindex.KeySet { return statedbindex.NewKeySet(statedbindex.String(r.Dest)) },
		FromKey:    statedbindex.String,
		Unique:     true,
	}
	linkRouteStatus = index.NewStatusIndex("status", func(r *LinkRoute) reconciler.Status { return r.Status })
)

// linkKernel prints what it is asked to do.
type linkKernel struct{}

func (linkKernel) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, r *LinkRoute) error {
	fmt.Println("add route", r.Dest, "dev", r.Link)
	return nil
}

func (linkKernel) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *LinkRoute) error {
	return nil
}

func (linkKernel) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*LinkRoute, statedb.Revision]) error {
	return nil
}

// ExampleRequires shows a route that waits for its link, a row of a
// table no reconciler writes, to be up: Blocked (not failing) until then,
// and added in the step that reads the link's change.
func ExampleRequires() {
	var (
		db     *statedb.DB
		links  statedb.RWTable[*Link]
		routes statedb.RWTable[*LinkRoute]
		rec    reconciler.Reconciler[*LinkRoute]
	)
	h := hive.New(
		statedb.Cell, job.Cell, reconciler.Cell,
		cell.Provide(func() cell.Health { h, _ := cell.NewSimpleHealth(); return h }),
		cell.Module("routes", "Routes",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db_ *statedb.DB, p reconciler.Params) (err error) {
				db = db_
				if links, err = statedb.NewTable(db, "links", linkByName); err != nil {
					return err
				}
				if routes, err = statedb.NewTable(db, "link-routes", linkRouteByDest, linkRouteStatus); err != nil {
					return err
				}
				rec, err = reconciler.New(reconciler.Config[*LinkRoute]{
					Table:           routes,
					GetObjectStatus: func(r *LinkRoute) reconciler.Status { return r.Status },
					SetObjectStatus: func(r *LinkRoute, s reconciler.Status) *LinkRoute { r.Status = s; return r },
					CloneObject:     func(r *LinkRoute) *LinkRoute { c := *r; return &c },
					Operations:      linkKernel{},
					Requires: []reconciler.Requirement[*LinkRoute]{
						reconciler.Requires(links,
							func(r *LinkRoute) []statedbindex.Key { return []statedbindex.Key{statedbindex.String(r.Link)} },
							func(l *Link) bool { return l.Up }),
					},
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

	wtxn := db.WriteTxn(routes)
	routes.Insert(wtxn, &LinkRoute{Dest: "10.0.0.0/8", Link: "eth0", Status: reconciler.StatusPending()})
	wtxn.Commit()
	// Ask again at each report until the loop has read the route.
	e, _ := rec.Explain(context.Background(), []byte("10.0.0.0/8"))
	for e.State != reconciler.KeyBlocked {
		<-e.Changed
		e, _ = rec.Explain(context.Background(), []byte("10.0.0.0/8"))
	}
	fmt.Println(e.State, "-", e.Reason)

	wtxn = db.WriteTxn(links)
	links.Insert(wtxn, &Link{Name: "eth0", Up: true})
	wtxn.Commit()
	if err := reconciler.WaitForReconciliation(context.Background(), db, routes, linkRouteStatus); err != nil {
		panic(err)
	}
	// Output:
	// Blocked - blocked on links row eth0: not in the table
	// add route 10.0.0.0/8 dev eth0
}
