package reconciler_test

import (
	"context"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// ownOps is a target for the ownership tests: Update runs update, Delete
// and Prune are counted, and Prune records the keys it was given and
// whether it ran under a claim of the whole set.
type ownOps struct {
	mu      sync.Mutex
	update  func(ctx context.Context, key string, n int) error
	prune   func(ctx context.Context) error
	updates map[string]int
	deletes int
	prunes  [][]string
	claimed []bool // per prune: its context carried the whole set's claim
}

func newOwnOps(update func(ctx context.Context, key string, n int) error) *ownOps {
	return &ownOps{update: update, updates: map[string]int{}}
}

func (o *ownOps) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *testObject) error {
	o.mu.Lock()
	n := o.updates[obj.ID]
	o.updates[obj.ID]++
	o.mu.Unlock()
	return o.update(ctx, obj.ID, n)
}

func (o *ownOps) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *testObject) error {
	o.mu.Lock()
	o.deletes++
	o.mu.Unlock()
	return nil
}

func (o *ownOps) Prune(ctx context.Context, _ statedb.ReadTxn, objs iter.Seq2[*testObject, statedb.Revision]) error {
	var keys []string
	for obj := range objs {
		keys = append(keys, obj.ID)
	}
	slices.Sort(keys)
	claim, _ := ctx.Value(claimKey{}).(string)
	o.mu.Lock()
	o.prunes = append(o.prunes, keys)
	o.claimed = append(o.claimed, ctx.Value(claimKey{}) != nil && claim == "")
	hook := o.prune
	o.mu.Unlock()
	if hook != nil {
		return hook(ctx)
	}
	return nil
}

func (o *ownOps) count(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.updates[key]
}

func (o *ownOps) numPrunes() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.prunes)
}

func ownsAll(string) bool  { return true }
func ownsNone(string) bool { return false }

// ownConfig is the config of the ownership tests: quick retries, no
// periodic work.
func ownConfig(f *fixture, ops *ownOps, own reconciler.Ownership, cfg reconciler.Config[*testObject]) reconciler.Config[*testObject] {
	cfg.Ownership = own
	cfg.RetryBackoffMin, cfg.RetryBackoffMax = time.Millisecond, 5*time.Millisecond
	if cfg.FullReconciliationInterval == 0 {
		cfg.FullReconciliationInterval = reconciler.Off
	}
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = reconciler.Off
	}
	return testConfig(f, ops, cfg)
}
