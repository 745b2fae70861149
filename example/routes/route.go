package main

import (
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"

	convergeindex "github.com/converge-go/converge/index"
	"github.com/converge-go/converge/reconciler"
)

// RouteSpec is a desired route as people and programs write it. The
// prefix is the route's identity: one route per destination in the
// agent's table. Gateway, Device or both say where the traffic goes.
//
// The table holds specs as written, valid or not: the HTTP API refuses
// invalid ones, but another cell of the agent may insert anything, and
// then the reconciler reports the route's error in its status (a
// Permanent one, as retrying cannot fix it).
type RouteSpec struct {
	Prefix  string `json:"prefix"`            // "10.1.0.0/24", "2001:db8:1::/48"; canonical form
	Gateway string `json:"gateway,omitempty"` // "192.0.2.254"; in a subnet of a device
	Device  string `json:"device,omitempty"`  // "converge0"; must exist in the namespace
}

// Route is the object of the desired-routes table: a spec and its
// reconciliation status.
type Route struct {
	RouteSpec
	Status reconciler.Status `json:"status"`
}

// Clone returns a shallow copy, as reconciler.Config.CloneObject wants.
func (r *Route) Clone() *Route {
	c := *r
	return &c
}

func getStatus(r *Route) reconciler.Status { return r.Status }

func setStatus(r *Route, s reconciler.Status) *Route {
	r.Status = s // r is already a clone
	return r
}

// TableHeader and TableRow make "db/show desired-routes" a table.
func (r *Route) TableHeader() []string {
	return []string{"Prefix", "Gateway", "Device", "Status"}
}

// TableRow implements statedb.TableWritable.
func (r *Route) TableRow() []string {
	return []string{r.Prefix, r.Gateway, r.Device, r.Status.Row()}
}

// routesTableName is the table's name in the database and the shell.
const routesTableName = "desired-routes"

// prefixIndex is the primary index: a route per prefix.
var prefixIndex = statedb.Index[*Route, string]{
	Name: "prefix",
	FromObject: func(r *Route) index.KeySet {
		return index.NewKeySet(index.String(r.Prefix))
	},
	FromKey:    index.String,
	FromString: index.FromString,
	Unique:     true,
}

// statusIndex lets reconciler.WaitForReconciliation find routes that are
// not Done.
var statusIndex = convergeindex.NewStatusIndex("status", getStatus)

func newRoutesTable(db *statedb.DB) (statedb.RWTable[*Route], error) {
	return statedb.NewTable(db, routesTableName, prefixIndex, statusIndex)
}
