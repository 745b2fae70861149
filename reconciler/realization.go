package reconciler

import (
	"slices"
	"sync"
	"time"
)

// Realization latency is the time from a change being written to the
// commit of the Done status that says the target has it, as kube-proxy's
// network_programming_duration_seconds measures. It starts at the
// UpdatedAt of the Pending status the writer set (StatusPending(), or
// StatusSet.Pending, whose Get gives each name that time) and ends when the
// write transaction that marked the object Done is committed: a round's
// commit (commit.go), or one of the transactions that write a Sync's
// result (syncresult.go). A failed change keeps its start in its retry
// entry, or in its syncEntry, until a retry succeeds. The clock is read
// once per transaction. What is not observed, and why:
//
//   - Failed attempts: the change is not realized yet. Its retry that
//     succeeds is observed, from the same start.
//   - Refreshes: not a user's change, only a check for drift.
//   - Deletes: a deleted object leaves no status behind to tell when the
//     delete was written.
//   - A zero UpdatedAt (a status built by hand or decoded from JSON or
//     YAML without it), or one after the commit (another clock's): the
//     start is unknown.

// realizationWindowSize is how many of the latest realization latencies
// Status() summarizes: enough for a stable p99, small enough to sort when
// asked.
const realizationWindowSize = 1024

// reportRealized hands one commit's realization latencies to the metrics
// and to the window Status() summarizes.
func (r *reconciler[Obj]) reportRealized(latencies []time.Duration) {
	if len(latencies) == 0 {
		return
	}
	r.metrics.Realized(latencies)
	r.realized.add(latencies)
}

// realizationWindow keeps the latest realization latencies, a fixed ring
// the loop adds to once per commit without allocating. Its quantiles are
// computed when Status() asks, and only when something was added since.
type realizationWindow struct {
	mu     sync.Mutex
	ring   [realizationWindowSize]time.Duration
	next   int // where the next latency goes
	n      int // latencies held, at most realizationWindowSize
	added  uint64
	sorted [realizationWindowSize]time.Duration // scratch for summary

	// summary as of summarized latencies added.
	summarized uint64
	summary    RealizationInfo
}

func (w *realizationWindow) add(ds []time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(ds) > realizationWindowSize {
		ds = ds[len(ds)-realizationWindowSize:]
	}
	for _, d := range ds {
		w.ring[w.next] = d
		w.next = (w.next + 1) % realizationWindowSize
	}
	w.n = min(w.n+len(ds), realizationWindowSize)
	w.added += uint64(len(ds))
}

// info summarizes the window: nearest-rank p50 and p99.
func (w *realizationWindow) info() RealizationInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.summarized == w.added {
		return w.summary
	}
	s := w.sorted[:w.n]
	copy(s, w.ring[:w.n])
	slices.Sort(s)
	w.summary = RealizationInfo{Samples: w.n, P50: nearestRank(s, 50), P99: nearestRank(s, 99)}
	w.summarized = w.added
	return w.summary
}

// nearestRank is the p-th percentile of sorted, non-empty s: its
// smallest element with at least p% of s at or below it.
func nearestRank(s []time.Duration, p int) time.Duration {
	rank := (len(s)*p + 99) / 100 // ceil(len(s) * p / 100)
	return s[max(rank, 1)-1]
}
