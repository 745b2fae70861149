package lease

import (
	"context"
	"log/slog"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
)

// Cell provides an *Elector built from the Config the application
// provides, and campaigns as a job for as long as the hive runs; its
// health says whether it leads, with the token, or which replica does.
// Stopping the hive drains the operations and gives the Lease up.
// Reconcilers join with the engine's Config.Ownership set to the Elector:
//
//	cell.Provide(func(cs kubernetes.Interface) lease.Config {
//		return lease.Config{Client: cs.CoordinationV1(), Namespace: ns, Name: "files-agent", Identity: podName}
//	}),
//	lease.Cell,
var Cell = cell.Module(
	"lease",
	"Leader election on a Kubernetes Lease for leader-only reconcilers",
	cell.ProvidePrivate(job.Registry.NewGroup),
	cell.Provide(newFromHive),
)

func newFromHive(cfg Config, log *slog.Logger, jobs job.Group) (*Elector, error) {
	e, err := New(cfg, log)
	if err != nil {
		return nil, err
	}
	jobs.Add(job.OneShot("campaign", func(ctx context.Context, health cell.Health) error {
		e.mu.Lock()
		e.health = func(s string) { health.OK(s) }
		e.mu.Unlock()
		health.OK("standby")
		return e.Run(ctx)
	}))
	return e, nil
}
