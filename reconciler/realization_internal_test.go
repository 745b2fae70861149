package reconciler

import (
	"testing"
	"time"
)

// TestRealizationWindow checks the window Status() summarizes: it keeps
// only the latest realizationWindowSize latencies, whatever the size of
// the batches they come in, and its quantiles are nearest-rank.
func TestRealizationWindow(t *testing.T) {
	var w realizationWindow
	if got := w.info(); got != (RealizationInfo{}) {
		t.Fatalf("empty window: %+v, want zero", got)
	}

	// 1..100ms: p50 is the 50th, p99 the 99th.
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	w.add(ds)
	want := RealizationInfo{Samples: 100, P50: 50 * time.Millisecond, P99: 99 * time.Millisecond}
	if got := w.info(); got != want {
		t.Fatalf("after 100: %+v, want %+v", got, want)
	}

	// One latency: it is every quantile.
	var one realizationWindow
	one.add([]time.Duration{7 * time.Second})
	if got := one.info(); got != (RealizationInfo{Samples: 1, P50: 7 * time.Second, P99: 7 * time.Second}) {
		t.Fatalf("one: %+v", got)
	}

	// A full window of 1h in batches of 7, then one batch larger than
	// the window whose last realizationWindowSize are 1s: the 100ms..1h
	// are all gone.
	for range realizationWindowSize/7 + 1 {
		w.add([]time.Duration{time.Hour, time.Hour, time.Hour, time.Hour, time.Hour, time.Hour, time.Hour})
	}
	if got := w.info(); got.Samples != realizationWindowSize || got.P50 != time.Hour {
		t.Fatalf("after a full window of 1h: %+v", got)
	}
	big := make([]time.Duration, realizationWindowSize+5)
	for i := range big {
		big[i] = time.Second
	}
	big[0] = time.Minute // dropped: older than the window
	w.add(big)
	want = RealizationInfo{Samples: realizationWindowSize, P50: time.Second, P99: time.Second}
	if got := w.info(); got != want {
		t.Fatalf("after a batch larger than the window: %+v, want %+v", got, want)
	}

	// Wrapping around, 2s replace the oldest 1s. p99 is the 1014th of
	// 1024 (nearest rank: ceil(0.99*1024)): 1s while 10 are 2s, 2s at 11.
	twos := []time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second,
		2 * time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second}
	w.add(twos)
	if got := w.info(); got.P99 != time.Second {
		t.Fatalf("10 of 1024 at 2s: %+v, want p99 1s", got)
	}
	w.add(nil) // nothing: the summary stays
	w.add(twos[:1])
	want = RealizationInfo{Samples: realizationWindowSize, P50: time.Second, P99: 2 * time.Second}
	if got := w.info(); got != want {
		t.Fatalf("11 of 1024 at 2s: %+v, want %+v", got, want)
	}
}

// TestRealizationNoAllocs checks that reporting a commit's latencies
// allocates nothing.
func TestRealizationNoAllocs(t *testing.T) {
	r := &reconciler[struct{}]{metrics: NopMetrics{}}
	ds := []time.Duration{time.Millisecond, time.Second, time.Minute}
	if n := testing.AllocsPerRun(100, func() { reportRealized(r, ds) }); n != 0 {
		t.Errorf("reportRealized: %v allocations, want 0", n)
	}
}
