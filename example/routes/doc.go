// Command routes is a converge agent with a real kernel as its target: it
// keeps the routes of a routing table of its own in sync with a table of
// desired routes, over netlink. It needs root (CAP_SYS_ADMIN to create a
// network namespace, CAP_NET_ADMIN to change routes).
//
// By default it creates a private network namespace with a dummy device
// (converge0, 192.0.2.1/24 and 2001:db8::1/64), so it never touches the
// host's routes; the namespace and its routes vanish when it stops.
// --netns runs it in an existing namespace instead. Run it from the
// repository root, and in another terminal:
//
//	$ sudo go run ./example/routes
//	$ curl -X PUT localhost:8081/routes/10.1.0.0/24 -d '{"gateway": "192.0.2.254"}'
//	$ curl localhost:8081/routes          # each route with its status: Done
//	$ curl -X PUT localhost:8081/routes/10.2.0.0/24 -d '{"gateway": "203.0.113.1"}'
//	$ curl localhost:8081/healthz         # 503: gateway 203.0.113.1 unreachable
//	$ sudo go run ./example/routes shell reconciler/status
//
// Like the files agent, a running agent serves hive's shell on a unix
// socket (--shell-sock-path); "go run ./example/routes shell" opens it, or
// runs one command: reconciler/status, reconciler/full, health,
// "db/show desired-routes".
//
// # What it shows beyond the files agent
//
//   - A target that others share. The agent owns only the routes in its
//     table (--table) that carry its protocol number (--protocol); Prune
//     and Delete remove only those, and never look at other routes. Give
//     it a table of its own all the same: the kernel keeps one route per
//     prefix, table and metric, so a desired prefix replaces another
//     protocol's route for that prefix in the agent's table.
//   - Errors that retrying cannot fix. A missing device or an unreachable
//     gateway fails with reconciler.Permanent naming the cause, on that
//     route alone; a transient kernel error is retried with backoff.
//   - Batches. With --batch (the default) a round's changes go to the
//     kernel through reconciler.BatchOperations, a chunk of route changes
//     per sendmsg (internal/netroute's Conn), rather than a request and an
//     acknowledgement per route.
//   - Drift repaired cheaply. Prune dumps the agent's routes once per full
//     reconciliation and puts back what was deleted or changed behind the
//     agent's back, instead of refreshing (replacing) every route.
//
// The files:
//
//   - route.go: the object (RouteSpec and its status), its table and
//     indexes; validate.go: what a valid spec is.
//   - ops.go: the Operations and BatchOperations. Update is ip route
//     replace, so it is idempotent; Delete treats "no such route" as done.
//   - kernel.go: the namespace, its dummy device and the netlink handles.
//   - desired.go and api.go: the HTTP API and the only writer of the table
//     besides the reconciler. Invalid specs get a 400 that says why.
//   - config.go and main.go: the flags (--help lists them) and the hive.
//     The operator endpoints (/status, /healthz, /metrics) are
//     example/internal/agentkit's, shared with the files agent.
package main
