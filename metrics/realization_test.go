package metrics_test

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-go/converge/metrics"
	"github.com/converge-go/converge/reconciler"
)

// TestRealizationObserved runs a reconciler on synctest's fake clock whose
// target takes exactly 3s per Update: the change inserted with
// StatusPending() lands in the realization histogram's 5s bucket and not
// its 2.5s one, with a sum of exactly 3s, in Prometheus and in expvar; a
// change whose status has no UpdatedAt is reconciled but not observed; and
// Status() summarizes the same latency.
func TestRealizationObserved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		p, err := metrics.NewPrometheus(reg)
		if err != nil {
			t.Fatal(err)
		}
		e := metrics.NewUnpublishedExpVar()
		f := newFixture(t, "realize", both{p, e})
		f.target.SetLatency(func() time.Duration { return 3 * time.Second })
		f.start()

		if err := f.rec.WaitUntilSettled(context.Background(), f.insert("timed")); err != nil {
			t.Fatal(err)
		}
		// Once it is done (a round commits its results together):
		// reconciled, not observed.
		wtxn := f.db.WriteTxn(f.table)
		if _, _, err := f.table.Insert(wtxn, &object{ID: "untimed", Status: reconciler.Status{Kind: reconciler.StatusKindPending}}); err != nil {
			t.Fatal(err)
		}
		if err := f.rec.WaitUntilSettled(context.Background(), f.table.Revision(wtxn.Commit())); err != nil {
			t.Fatal(err)
		}

		count, sum, buckets := realizationHistogram(t, reg)
		if count != 1 || sum != 3 {
			t.Errorf("count %d, sum %v: want one observation of 3s", count, sum)
		}
		for _, le := range metrics.RealizationBuckets() {
			want := uint64(0)
			if le >= 5 {
				want = 1
			}
			if got, ok := buckets[le]; !ok || got != want {
				t.Errorf("bucket le=%v: %d (present: %t), want %d", le, got, ok, want)
			}
		}
		if len(buckets) != len(metrics.RealizationBuckets()) {
			t.Errorf("%d buckets, want %d", len(buckets), len(metrics.RealizationBuckets()))
		}

		var all map[string]map[string]json.RawMessage
		if err := json.Unmarshal([]byte(e.String()), &all); err != nil {
			t.Fatal(err)
		}
		var hv struct{ Count, Sum float64 }
		if err := json.Unmarshal(all["test/realize"]["realization_duration_seconds"], &hv); err != nil {
			t.Fatal(err)
		}
		if hv.Count != 1 || hv.Sum != 3 {
			t.Errorf("expvar realization_duration_seconds %+v, want count 1, sum 3", hv)
		}

		want := reconciler.RealizationInfo{Samples: 1, P50: 3 * time.Second, P99: 3 * time.Second}
		if got := f.rec.Status().Realization; got != want {
			t.Errorf("Status().Realization = %+v, want %+v", got, want)
		}
	})
}

// both reports to two Metrics.
type both [2]reconciler.Metrics

func (b both) Reconciler(id reconciler.ReconcilerID) reconciler.ReconcilerMetrics {
	return bothReconciler{b[0].Reconciler(id), b[1].Reconciler(id)}
}

type bothReconciler [2]reconciler.ReconcilerMetrics

func (b bothReconciler) Operation(op reconciler.Op, res reconciler.Result, n int, d time.Duration) {
	b[0].Operation(op, res, n, d)
	b[1].Operation(op, res, n, d)
}

func (b bothReconciler) BatchEntries(op reconciler.Op, res reconciler.Result, n int) {
	b[0].BatchEntries(op, res, n)
	b[1].BatchEntries(op, res, n)
}

func (b bothReconciler) Round(n int, d time.Duration) { b[0].Round(n, d); b[1].Round(n, d) }

func (b bothReconciler) FullReconciliation(d time.Duration, err error) {
	b[0].FullReconciliation(d, err)
	b[1].FullReconciliation(d, err)
}

func (b bothReconciler) RetryScheduled() { b[0].RetryScheduled(); b[1].RetryScheduled() }
func (b bothReconciler) ReadyWaits(w []reconciler.ReadyWait) {
	b[0].ReadyWaits(w)
	b[1].ReadyWaits(w)
}
func (b bothReconciler) UnreconciledWrite() {
	b[0].UnreconciledWrite()
	b[1].UnreconciledWrite()
}

func (b bothReconciler) Realized(ds []time.Duration) { b[0].Realized(ds); b[1].Realized(ds) }

func (b bothReconciler) Gauges(g reconciler.Gauges) { b[0].Gauges(g); b[1].Gauges(g) }

// realizationHistogram gathers the one realization histogram of reg: its
// count, sum, and cumulative count by upper bound.
func realizationHistogram(t *testing.T, reg prometheus.Gatherer) (uint64, float64, map[float64]uint64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != metrics.Prefix+"realization_duration_seconds" || len(mf.GetMetric()) != 1 {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		buckets := map[float64]uint64{}
		for _, b := range h.GetBucket() {
			buckets[b.GetUpperBound()] = b.GetCumulativeCount()
		}
		return h.GetSampleCount(), h.GetSampleSum(), buckets
	}
	t.Fatal("no realization_duration_seconds series")
	return 0, 0, nil
}
