package main

import (
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

func newDesiredRoutes(db *statedb.DB, routes statedb.RWTable[*Route]) *desiredRoutes {
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
