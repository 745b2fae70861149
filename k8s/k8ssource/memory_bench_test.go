package k8ssource_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/cilium/statedb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/converge-go/converge/reconciler"
)

// heap returns the live heap after a full collection.
func heap() uint64 {
	goruntime.GC()
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkMemory: the live heap of 100k objects as the table the source
// feeds, against a client-go informer's store plus the same table built
// from it (what a program that feeds its table from an informer holds).
// Two shapes of object: "tiny" (a one-field spec and the least metadata)
// and "applied" (what kubectl apply leaves: labels, the
// last-applied-configuration annotation, a ten-field spec). The API
// server runs in this process: its heap is measured too, after it has
// settled, so each figure carries some of its noise.
func BenchmarkMemory(b *testing.B) {
	const n = 100_000
	for _, shape := range []string{"tiny", "applied"} {
		b.Run(shape, func(b *testing.B) {
			c := newCRD(b, cached)
			objs := make([]*unstructured.Unstructured, n)
			for i := range objs {
				objs[i] = c.object("bench", fmt.Sprintf("m%06d", i), fmt.Sprint(i))
				if shape == "applied" {
					applied(objs[i])
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := c.srv.PutRaw(ctx, c.gvr, objs); err != nil {
				b.Fatal(err)
			}
			objs = nil
			// Let the API server's watch cache take them in: it shares the heap.
			if err := informerSync(c, func(cache.Store) {}); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				source, informer := memory(b, c, n)
				b.ReportMetric(float64(source)/n, "source-B/object")
				b.ReportMetric(float64(informer)/n, "informer+table-B/object")
				b.ReportMetric(float64(source)/float64(informer), "ratio")
			}
		})
	}
}

// applied gives u what a kubectl apply of a real manifest leaves on it.
func applied(u *unstructured.Unstructured) {
	spec := map[string]any{}
	for i := range 10 {
		spec[fmt.Sprintf("field%d", i)] = fmt.Sprintf("value-%d-%s", i, u.GetName())
	}
	v, _, _ := unstructured.NestedString(u.Object, "spec", "value")
	spec["value"] = v
	u.Object["spec"] = spec
	u.SetLabels(map[string]string{"app.kubernetes.io/name": "bench", "app.kubernetes.io/part-of": "converge", "tier": "backend"})
	last, _ := u.MarshalJSON()
	u.SetAnnotations(map[string]string{"kubectl.kubernetes.io/last-applied-configuration": string(last)})
}

// memory returns the live heap the source's table takes for c's n
// objects, and what an informer's store plus the same table take.
func memory(b *testing.B, c *crd, n int) (source, informer uint64) {
	base := heap()
	tg := newTarget()
	tg.discard = true // the target's copy is not the program's memory
	a := startAgent(b, c, tg, agentOpts{noStatus: true})
	a.waitInitialized()
	a.waitTable("done", func(txn statedb.ReadTxn) bool { _, done := a.rows(txn); return done })
	source = heap() - base
	a.stop()

	base = heap()
	var held []*obj
	var store cache.Store
	err := informerSync(c, func(s cache.Store) {
		store = s
		for _, it := range s.List() {
			objs, _ := transform(it.(*unstructured.Unstructured))
			held = append(held, objs...)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	// The same table as the source's, built from the informer's store.
	db := statedb.New()
	tbl, err := statedb.NewTable(db, "objects", keyIndex)
	if err != nil {
		b.Fatal(err)
	}
	wtxn := db.WriteTxn(tbl)
	for _, o := range held {
		o.Status = reconciler.StatusDone()
		tbl.Insert(wtxn, o)
	}
	wtxn.Commit()
	held = nil
	informer = heap() - base
	goruntime.KeepAlive(store)
	goruntime.KeepAlive(tbl)
	if len(store.List()) != n {
		b.Fatalf("informer holds %d objects", len(store.List()))
	}
	return source, informer
}
