package reconciler_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/converge-go/converge/reconciler"
)

// TestWorkFollowsChanges: work per round follows what changed, not the
// table. Over a table of 20,000 Done objects, one change costs the
// reconciler a handful of looks at objects (counted as calls of
// GetObjectStatus and CloneObject, which it makes for every object it
// reads or writes), not one per object of the table.
func TestWorkFollowsChanges(t *testing.T) {
	const n = 20_000
	var looks atomic.Int64
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			get, clone := cfg.GetObjectStatus, cfg.CloneObject
			cfg.GetObjectStatus = func(o *testObject) reconciler.Status { looks.Add(1); return get(o) }
			cfg.CloneObject = func(o *testObject) *testObject { looks.Add(1); return clone(o) }
		},
		func(f *fixture, _ *timedOps) {
			objs := make([]*testObject, n)
			for i := range objs {
				objs[i] = pendingObject(fmt.Sprintf("k%05d", i), "v")
			}
			insert(t, f, objs...)
			r, _ := f.reconciler("")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
				t.Fatal(err)
			}
			if got := looks.Load(); got < n {
				t.Fatalf("%d looks for %d objects: the counting is broken", got, n)
			}
			looks.Store(0)
			insert(t, f, pendingObject("k00042", "w"))
			if err := r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
				t.Fatal(err)
			}
			if got := looks.Load(); got > 20 {
				t.Fatalf("one change over a table of %d cost %d looks at objects, want a handful", n, got)
			}
		})
}
