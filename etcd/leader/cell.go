package leader

import (
	"context"
	"log/slog"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
)

// Cell provides an *Elector built from the Config the application provides
// (its etcd Client included) and campaigns as a job for as long as the
// hive runs; stopping the hive resigns. Reconcilers join it with Govern,
// or with the engine's Config.Ownership set to the Elector:
//
//	cell.Provide(func(cli *clientv3.Client) leader.Config {
//		return leader.Config{Client: cli, Prefix: "/fleet/leader", Name: hostname}
//	}),
//	leader.Cell,
//	cell.Invoke(func(e *leader.Elector, r reconciler.Reconciler[*Group]) { e.Govern(r) }),
var Cell = cell.Module(
	"leader",
	"Leader election on etcd for leader-only reconcilers",
	cell.ProvidePrivate(job.Registry.NewGroup),
	cell.Provide(newFromHive),
)

func newFromHive(cfg Config, log *slog.Logger, jobs job.Group) (*Elector, error) {
	e, err := New(cfg, log)
	if err != nil {
		return nil, err
	}
	jobs.Add(job.OneShot("campaign", func(ctx context.Context, _ cell.Health) error {
		return e.Run(ctx)
	}))
	return e, nil
}
