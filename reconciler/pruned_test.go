package reconciler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// TestWaitUntilPruned: a test can wait for the first Prune, and for the
// Prune a trigger asks for: WaitUntilPruned returns once a Prune that saw
// the revision succeeded (the stray entry is gone from the target by
// then), not before; while the Prune fails it gives up saying why.
func TestWaitUntilPruned(t *testing.T) {
	for _, whole := range []bool{false, true} {
		name := "per-object"
		if whole {
			name = "whole-set"
		}
		t.Run(name, func(t *testing.T) {
			inBubble(t,
				func(cfg *reconciler.Config[*testObject]) {
					cfg.FullReconciliationInterval = time.Hour
					if whole {
						cfg.Operations, cfg.SyncOperations = nil, &testSyncOps{target: cfg.Operations.(*timedOps).target}
						cfg.RoundRateLimiter, cfg.RefreshRateLimiter, cfg.RefreshInterval = nil, nil, 0
					}
				},
				func(f *fixture, ops *timedOps) {
					target := f.target("")
					ctx := context.Background()
					target.Update(ctx, "stray", "x", false)
					insert(t, f, pendingObject("a", "v"))
					r, _ := f.reconciler("")
					// The table is initialized before the insert: the first
					// prune may have run before it. Ask for one that sees it.
					r.TriggerFullReconciliation()
					short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, time.Minute) }
					c, cancel := short()
					defer cancel()
					if err := r.WaitUntilPruned(c, f.table.Revision(f.db.ReadTxn())); err != nil {
						t.Fatalf("the first prune: %v", err)
					}
					if _, ok := target.State()["stray"]; ok {
						t.Fatal("WaitUntilPruned returned with the stray entry still in the target")
					}
					// A change alone prunes nothing per object; a whole-set
					// Sync applies the whole snapshot, which prunes.
					target.Update(ctx, "stray", "x", false)
					insert(t, f, pendingObject("b", "v"))
					c, cancel = short()
					defer cancel()
					err := r.WaitUntilPruned(c, f.table.Revision(f.db.ReadTxn()))
					switch {
					case !whole && (!errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not pruned")):
						t.Fatalf("WaitUntilPruned with no prune due: %v, want it to time out", err)
					case whole && err != nil:
						t.Fatalf("WaitUntilPruned after a Sync: %v", err)
					}
					// The prune fails until healed.
					op := map[bool]string{false: "prune", true: "sync"}[whole]
					target.SetFault(op, fake.Fault{Mode: fake.ModeError})
					target.Update(ctx, "stray", "x", false)
					insert(t, f, pendingObject("c", "v"))
					rev := f.table.Revision(f.db.ReadTxn())
					r.TriggerFullReconciliation()
					c, cancel = short()
					defer cancel()
					if err := r.WaitUntilPruned(c, rev); !errors.Is(err, context.DeadlineExceeded) ||
						!strings.Contains(err.Error(), "the last full reconciliation failed") {
						t.Fatalf("WaitUntilPruned with the prune failing: %v", err)
					}
					target.Heal(op)
					r.TriggerFullReconciliation()
					c, cancel = short()
					defer cancel()
					if err := r.WaitUntilPruned(c, rev); err != nil {
						t.Fatalf("after a trigger: %v", err)
					}
					if _, ok := target.State()["stray"]; ok {
						t.Fatal("WaitUntilPruned returned with the stray entry still in the target")
					}
				})
		})
	}
}
