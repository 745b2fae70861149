package shard

import (
	"context"
	"log/slog"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
)

// Cell provides a *Manager built from the Config the application provides
// (its etcd Client included) and runs it as a job for as long as the hive
// runs; stopping the hive releases every slot by revoking the lease. A
// sharded reconciler takes the Manager as its Config.Ownership:
//
//	cell.Provide(func(cli *clientv3.Client) shard.Config {
//		return shard.Config{Client: cli, Prefix: "/fleet/shards", Name: hostname}
//	}),
//	shard.Cell,
var Cell = cell.Module(
	"shard",
	"Slot ownership on etcd for sharded reconcilers",
	cell.ProvidePrivate(job.Registry.NewGroup),
	cell.Provide(newFromHive),
)

func newFromHive(cfg Config, log *slog.Logger, jobs job.Group) (*Manager, error) {
	m, err := New(cfg, log)
	if err != nil {
		return nil, err
	}
	jobs.Add(job.OneShot("slots", func(ctx context.Context, _ cell.Health) error {
		return m.Run(ctx)
	}))
	return m, nil
}
