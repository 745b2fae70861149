// Package index provides statedb indexes over the reconciliation status
// that converge's reconciler keeps inside each object.
//
// A status index answers "which objects are Pending, Refreshing, Done or in
// Error?" without scanning the table. reconciler.WaitForReconciliation
// queries it to wait until no object is Pending, Refreshing or in Error;
// programs and operators query it to list the objects whose reconciliation
// failed:
//
//	statusIdx := index.NewStatusIndex("", func(o *Route) reconciler.Status { return o.Status })
//	routes, _ := statedb.NewTable(db, "routes", routeIDIndex, statusIdx)
//	...
//	for r := range routes.List(db.ReadTxn(), statusIdx.Query(reconciler.StatusKindError)) {
//		log.Printf("route %s: %s", r.ID, r.Status.Error)
//	}
//
// The index parses kind names ("Error", "Done", ...) from strings, so the
// db/show and db/get script commands can query it too.
//
// A table whose objects carry a reconciler.StatusSet (several reconcilers
// over one object) gets one status index per reconciler, each with its own
// name.
package index
