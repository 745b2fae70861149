package reconciler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/converge-go/converge/internal/lineartest"
	"github.com/converge-go/converge/reconciler"
)

// TestDependencyChainsScaleLinearly: objects that each depend on the one
// written a few transactions before make long chains, most of each Done
// by the time the next link is released. Four times the objects (chains
// four times as long) cost about the same per object: a release or a
// dispatch does not walk down the Done part of a chain looking for a
// cycle (it did, and deps/one-edge's prev row was quadratic).
func TestDependencyChainsScaleLinearly(t *testing.T) {
	lineartest.Check(t, 1000, func(n int) string { return strings.Repeat("x", n) },
		func(s string) { runChains(t, len(s)) })
}

// runChains reconciles n objects in transactions of 10, each depending on
// the object 10 before it, until all are Done.
func runChains(t *testing.T, n int) {
	const batch = 10
	f := newFixture(t)
	if err := f.hive.Start(f.log, context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := f.hive.Stop(f.log, context.Background()); err != nil {
			t.Error(err)
		}
	}()
	ops := &testOps{target: f.target(""), getStatus: func(o *testObject) reconciler.Status { return o.Status }}
	cfg := testConfig(f, ops, reconciler.Config[*testObject]{
		RoundRateLimiter:           rate.NewLimiter(rate.Inf, 1),
		FullReconciliationInterval: reconciler.Off,
		RefreshInterval:            reconciler.Off,
		DependsOn:                  dependsOn,
	})
	r, err := reconciler.New(cfg, f.params)
	if err != nil {
		t.Fatal(err)
	}
	f.markInit()
	key := func(i int) string { return fmt.Sprintf("c%06d", i) }
	for i := 0; i < n; i += batch {
		var objs []*testObject
		for j := i; j < min(i+batch, n); j++ {
			value := "v"
			if j >= batch {
				value = "v>" + key(j-batch)
			}
			objs = append(objs, pendingObject(key(j), value))
		}
		insert(t, f, objs...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, _, err := r.WaitUntilReconciled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
}
