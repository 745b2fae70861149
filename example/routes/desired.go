package main

import (
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// desiredRoutes is the desired set of routes for the API: it reads the
// desired-routes table and, with the reconciler (which writes statuses),
// is its only writer. The set lives in memory: a restarted agent desires
// nothing until told, and its first full reconciliation prunes what it
// left in an existing namespace (--netns).
type desiredRoutes struct {
	db     *statedb.DB
	routes statedb.RWTable[*Route]
}

// newDesiredRoutes registers the table's initializer and completes it when
// the hive starts. The reconciler prunes nothing until every initializer
// of the table is done, so that a table still being filled never looks
// like "delete every route". Here the initial set is empty (it lives in
// memory); an agent that keeps its desired routes somewhere would insert
// them at start and complete the initializer in the same transaction.
func newDesiredRoutes(lc cell.Lifecycle, db *statedb.DB, routes statedb.RWTable[*Route]) *desiredRoutes {
	wtxn := db.WriteTxn(routes)
	loaded := routes.RegisterInitializer(wtxn, "desired-routes")
	wtxn.Commit()
	lc.Append(cell.Hook{OnStart: func(cell.HookContext) error {
		wtxn := db.WriteTxn(routes)
		loaded(wtxn)
		wtxn.Commit()
		return nil
	}})
	return &desiredRoutes{db: db, routes: routes}
}

// List returns every desired route with its status, sorted by prefix.
func (d *desiredRoutes) List() []*Route {
	out := []*Route{}
	for r := range d.routes.All(d.db.ReadTxn()) {
		out = append(out, r)
	}
	return out
}

// Get returns the desired route of a prefix.
func (d *desiredRoutes) Get(prefix string) (*Route, bool) {
	r, _, found := d.routes.Get(d.db.ReadTxn(), prefixIndex.Query(prefix))
	return r, found
}

// Put desires spec: it inserts it, Pending, and returns the route as
// stored and whether it is new. Putting what is already desired changes
// nothing, unless the route is in Error: then it is tried again at once.
func (d *desiredRoutes) Put(spec RouteSpec) (r *Route, created bool) {
	wtxn := d.db.WriteTxn(d.routes)
	defer wtxn.Abort()
	old, _, found := d.routes.Get(wtxn, prefixIndex.Query(spec.Prefix))
	if found && old.RouteSpec == spec && old.Status.Kind != reconciler.StatusKindError {
		return old, false
	}
	r = &Route{RouteSpec: spec, Status: reconciler.StatusPending()}
	d.routes.Insert(wtxn, r)
	wtxn.Commit()
	return r, !found
}

// Delete stops desiring the route of a prefix; the reconciler then
// deletes it from the kernel. It reports whether the route was desired.
func (d *desiredRoutes) Delete(prefix string) bool {
	wtxn := d.db.WriteTxn(d.routes)
	defer wtxn.Abort()
	old, _, found := d.routes.Get(wtxn, prefixIndex.Query(prefix))
	if !found {
		return false
	}
	d.routes.Delete(wtxn, old)
	wtxn.Commit()
	return true
}
