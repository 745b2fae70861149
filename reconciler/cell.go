package reconciler

import (
	"log/slog"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
)

// Params are what every reconciler takes from the hive. Embed them, or take
// them as a parameter of a cell.Invoke function, and pass them to New or
// Register.
//
// The hive must have statedb.Cell and job.Cell, and the reconciler's module
// must provide its job group, the one thing users tend to forget:
//
//	cell.Module("routes", "Routes",
//		cell.ProvidePrivate(job.Registry.NewGroup),
//		cell.Invoke(registerRouteReconciler),
//	)
type Params struct {
	cell.In

	Log      *slog.Logger
	DB       *statedb.DB
	JobGroup job.Group
	ModuleID cell.FullModuleID

	// DefaultMetrics is used by reconcilers whose Config.Metrics is nil.
	// metrics.Cell provides it.
	DefaultMetrics Metrics `optional:"true"`

	// Registry, provided by Cell, makes the reconciler visible to the
	// reconciler/... script commands.
	Registry *Registry `optional:"true"`
}

// Register constructs a reconciler and adds it to the module's job group.
// Use it from cell.Invoke when nothing needs the Reconciler value:
//
//	cell.Invoke(func(p reconciler.Params, t statedb.RWTable[*Route], ops *routeOps) error {
//		return reconciler.Register(reconciler.Config[*Route]{Table: t, ...}, p)
//	})
func Register[Obj comparable](cfg Config[Obj], p Params) error {
	_, err := New(cfg, p)
	return err
}
