package main

import (
	"log/slog"
	"net/http"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-go/converge/example/internal/agentkit"
	"github.com/converge-go/converge/health"
	"github.com/converge-go/converge/reconciler"
)

// routesModule is the application: the table of desired routes, the
// kernel it reconciles them into, the reconciler and the HTTP server.
// extra cells go inside the module, where the test reaches what the
// module keeps private (the writable table).
func routesModule(extra ...cell.Cell) cell.Cell {
	return cell.Module(
		"routes",
		"Keeps kernel routes in sync with a table of desired routes",
		append([]cell.Cell{
			cell.Config(defaultConfig),
			cell.Invoke(Config.validate),

			// The module's job group, in which the reconciler runs.
			cell.ProvidePrivate(job.Registry.NewGroup),

			cell.ProvidePrivate(
				newRoutesTable, // statedb.RWTable[*Route]: only this module writes
				newRouteOps,
				newDesiredRoutes,
			),
			// Public, so that the test can read the table, wait on the
			// reconciler and look into the kernel.
			cell.Provide(
				statedb.RWTable[*Route].ToTable,
				newKernel,
				newRouteReconciler,
				newServer,
			),
			cell.Invoke(func(*agentkit.Server, reconciler.Reconciler[*Route]) {}),
		}, extra...)...,
	)
}

// newHive returns the application's hive, with extra cells added inside
// the routes module (the test adds one that captures objects to drive
// it).
func newHive(extra ...cell.Cell) *hive.Hive {
	cells := append(agentkit.BaseCells(), agentkit.ShellCell("routes"), routesModule(extra...))
	return agentkit.NewHive(cells...)
}

// newRouteReconciler starts converge's reconciler on the desired-routes
// table with routeOps as its target.
func newRouteReconciler(cfg Config, p reconciler.Params, routes statedb.RWTable[*Route], ops *routeOps) (reconciler.Reconciler[*Route], error) {
	rc := reconciler.Config[*Route]{
		Table:           routes,
		GetObjectStatus: getStatus,
		SetObjectStatus: setStatus,
		CloneObject:     (*Route).Clone,
		Operations:      ops,
		Concurrency:     cfg.Concurrency,

		// Drift (a route deleted or changed behind the agent's back) is
		// repaired by Prune, which dumps the agent's routes once and
		// fixes what differs. That costs one dump per full
		// reconciliation, where refreshing would replace every route:
		// so no refresh.
		FullReconciliationInterval: cfg.FullReconciliationInterval,
		RefreshInterval:            reconciler.Off,

		// A transient kernel error is retried from 100ms on, doubling,
		// but at least once per full reconciliation interval.
		RetryBackoffMax: cfg.FullReconciliationInterval,
	}
	if cfg.Batch {
		rc.BatchOperations = ops
	}
	return reconciler.New(rc, p)
}

// serverParams is what the HTTP server serves.
type serverParams struct {
	cell.In

	Lifecycle cell.Lifecycle
	Log       *slog.Logger
	Config    Config
	Desired   *desiredRoutes
	Registry  *reconciler.Registry
	Metrics   *prometheus.Registry
	Health    *health.Health
}

// newServer serves the route API and the operator endpoints.
func newServer(p serverParams) (*agentkit.Server, error) {
	mux := http.NewServeMux()
	(&routeAPI{desired: p.Desired}).register(mux)
	mux.HandleFunc("GET /{$}", serveIndex)
	op := agentkit.Operator{Health: p.Health, Metrics: p.Metrics, Registry: p.Registry}
	if err := op.Register(mux); err != nil {
		return nil, err
	}
	return agentkit.NewServer(p.Lifecycle, p.Log, p.Config.HTTPAddr, mux), nil
}

func main() {
	agentkit.Main(newHive(), agentkit.Program{
		Name:  "routes",
		Short: "Keep the kernel's routes in sync with a table of desired routes",
		Long: "Keeps the routes of a routing table of its own, in a private network namespace\n" +
			"(or --netns), in sync with a table of desired routes that an HTTP API changes,\n" +
			"using converge's reconciler. Needs root. See the package documentation.",
		Shell:    true,
		Greeting: "converge routes shell: try reconciler/status, db/show desired-routes, health, help",
	})
}
