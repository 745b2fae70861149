package reconciler_test

import (
	"context"
	"iter"
	"maps"
	"slices"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// The chaos test's whole-set configuration: the same storm of changes,
// restarts, suspends and triggers, against a target that takes the whole
// set. A Sync meets the faults an operation meets (fails, panics, hangs,
// ignores its context, defers, loses its reply), and besides fails single
// objects now and then, as a renderer rejects an invalid object. Two Syncs
// never overlap (the fake target and chaosOps.begin both check), and no
// applied version of a key goes backwards.

// syncChaosConfig turns the chaos test's Config into a whole-set one.
func syncChaosConfig(cfg *reconciler.Config[*testObject], ops *chaosOps) {
	cfg.Operations, cfg.SyncOperations = nil, ops
	cfg.Concurrency, cfg.RefreshInterval, cfg.RefreshRateLimiter = 0, 0, nil
	cfg.SyncDebounce = reconciler.Trailing(time.Millisecond, 5*time.Millisecond)
}

// Sync implements SyncOperations with the chaos test's faults.
func (c *chaosOps) Sync(ctx context.Context, _ statedb.ReadTxn, desired iter.Seq2[*testObject, statedb.Revision], _ iter.Seq[reconciler.Change[*testObject]]) error {
	versions := map[string]int{}
	for obj := range desired {
		versions[obj.ID] = chaosVersion(obj)
	}
	return c.do(ctx, opSync, "sync", 0, func(ctx context.Context) error {
		if key := c.invalidKey(versions); key != "" {
			c.inner.target.SetFault(key, fake.Fault{Mode: fake.ModeError, Count: 1})
		}
		objs, failed, err := (&testSyncOps{target: c.inner.target}).sync(ctx, desired)
		if err != nil {
			return err
		}
		for key, v := range versions {
			if failed[key] == nil {
				c.apply(opSync, key, v)
			}
		}
		return failObjects(objs, failed)
	})
}

// invalidKey picks, for one Sync in five while the faults are on, a desired
// key the target rejects alone. The pick depends on the seed and the
// number of Syncs so far.
func (c *chaosOps) invalidKey(versions map[string]int) string {
	if !c.faultsOn.Load() || len(versions) == 0 {
		return ""
	}
	c.mu.Lock()
	n := c.attempts["sync"]
	c.mu.Unlock()
	x := splitmix64(c.seed ^ n*0x5bd1e995)
	if x%5 != 0 {
		return ""
	}
	keys := slices.Sorted(maps.Keys(versions))
	return keys[(x/5)%uint64(len(keys))]
}
