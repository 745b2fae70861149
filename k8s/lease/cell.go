package lease

import (
	"context"
	"fmt"
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

// ShardCell provides a *Sharder built from the ShardConfig the
// application provides, and holds this replica's share of the slots as a
// job for as long as the hive runs; its health says how many slots it
// owns among how many members. Stopping the hive drains the operations,
// releases the slots and deletes the membership Lease. Sharded
// reconcilers join with the engine's Config.Ownership set to the Sharder:
//
//	cell.Provide(func(cs kubernetes.Interface) lease.ShardConfig {
//		return lease.ShardConfig{Client: cs.CoordinationV1(), Namespace: ns, Name: "files-agent", Identity: podName}
//	}),
//	lease.ShardCell,
var ShardCell = cell.Module(
	"lease-shard",
	"Sharding on Kubernetes Leases",
	cell.ProvidePrivate(job.Registry.NewGroup),
	cell.Provide(newSharderFromHive),
)

func newSharderFromHive(cfg ShardConfig, log *slog.Logger, jobs job.Group) (*Sharder, error) {
	m, err := NewSharder(cfg, log)
	if err != nil {
		return nil, err
	}
	jobs.Add(job.OneShot("shard", func(ctx context.Context, health cell.Health) error {
		health.OK("joining")
		reported := make(chan struct{})
		go func() {
			defer close(reported)
			for {
				ch := m.Changed()
				health.OK(fmt.Sprintf("%d of %d slots owned, %d members", len(m.Owned()), m.cfg.Slots, len(m.Members())))
				select {
				case <-ch:
				case <-ctx.Done():
					return
				}
			}
		}()
		err := m.Run(ctx)
		<-reported
		return err
	}))
	return m, nil
}
