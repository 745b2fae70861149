package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cilium/statedb"
	sdbindex "github.com/cilium/statedb/index"

	"github.com/converge-go/converge/reconciler"
)

// deps/requires-release: Config.Requires' release, as deps/release is
// DependsOn's. Object i requires row i of another table ("bench-links",
// written by nothing but the benchmark); one at a time, the object is
// inserted and waits Blocked (Explain says so), then the row is
// inserted. A sample is the object's Update start less the moment just
// before the row's transaction commits: reading the other table's change,
// the release, and the hand-off to a worker.

// requiresReleaseWorkload is deps/requires-release.
func requiresReleaseWorkload(sz sizes) workload {
	run := func(ctx context.Context) (measure, error) { return runRequiresRelease(ctx, sz) }
	atMost := func(ms float64) func(o, _ float64) bool { return func(o, _ float64) bool { return o <= ms } }
	return workload{
		name:     "deps/requires-release",
		variants: []variant{{name: "converge", side: sideConverge, run: run}},
		rows: []rowSpec{
			{name: "deps/requires-release/p50", unit: unitMillis, lowerBetter: true, reference: "goal p99",
				derive: func(med func(string, string) float64) (float64, float64) { return med("converge", metricP50), 1 }},
			goalRow("deps/requires-release/p99", unitMillis, true, "converge", metricP99, 1, "<=1ms", atMost(1)),
			{name: "deps/requires-release/max", unit: unitMillis, lowerBetter: true, reference: "goal p99",
				derive: func(med func(string, string) float64) (float64, float64) { return med("converge", metricMax), 1 }},
		},
	}
}

func runRequiresRelease(ctx context.Context, sz sizes) (measure, error) {
	n := sz.deps.releaseSamples
	tg := newDepsTarget()
	tg.stamp(n)
	var links statedb.RWTable[*convergeObject]
	r, rec, err := newDepsRigWith(ctx, tg, 1, func(db *statedb.DB, cfg *reconciler.Config[*convergeObject]) (err error) {
		if links, err = statedb.NewTable(db, "bench-links", convergeIDIndex); err != nil {
			return err
		}
		cfg.Requires = []reconciler.Requirement[*convergeObject]{reconciler.Requires(links,
			func(o *convergeObject) []sdbindex.Key { return []sdbindex.Key{sdbindex.Uint64(o.ID)} }, nil)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	samples := make([]float64, 0, n)
	for i := range n {
		id := uint64(i)
		insertIDs(r, []uint64{id}, 1)
		if err = waitBlocked(ctx, rec, sdbindex.Uint64(id)); err != nil {
			break
		}
		wtxn := r.db.WriteTxn(links)
		links.Insert(wtxn, &convergeObject{ID: id})
		at := time.Now().UnixNano()
		wtxn.Commit()
		if err = r.waitObjectDone(ctx, i, 0); err != nil {
			break
		}
		samples = append(samples, float64(tg.started[id].Load()-at)/float64(time.Millisecond))
	}
	if err == nil && tg.updates.Load() != int64(n) {
		err = fmt.Errorf("%d Updates for %d objects", tg.updates.Load(), n)
	}
	return stopped(r, latencyMeasure(samples), err)
}

// waitBlocked waits until rec's Explain says key is Blocked, asking again
// at each of its reports.
func waitBlocked(ctx context.Context, rec reconciler.Reconciler[*convergeObject], key []byte) error {
	for {
		e, err := rec.Explain(ctx, key)
		if err != nil {
			return err
		}
		if e.State == reconciler.KeyBlocked {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("object %x not Blocked: %w", key, ctx.Err())
		case <-e.Changed:
		}
	}
}
