package reconciler

import (
	"math/rand/v2"
	"time"

	"github.com/cilium/statedb"
)

// backoff computes retry delays: exponential from min to max with "equal
// jitter" (half the delay fixed, half uniformly random). Jitter spreads the
// retries of objects that failed together, in one target outage, so they do
// not come back in lockstep; keeping half fixed means a dead target is never
// retried sooner than half the nominal backoff.
type backoff struct {
	min, max time.Duration
	rand     func(n int64) int64 // uniform in [0, n); replaceable in tests
}

func newBackoff(min, max time.Duration) backoff {
	return backoff{min: min, max: max, rand: rand.Int64N}
}

// nominal is the un-jittered delay before the attempt that follows the
// given number of consecutive failures (failures >= 1). It saturates at max
// for any count, so no shift or multiplication can overflow.
func (b backoff) nominal(failures int) time.Duration {
	d := b.min
	for i := 1; i < failures && d < b.max; i++ {
		if d > b.max/2 {
			return b.max
		}
		d *= 2
	}
	return min(d, b.max)
}

// delay is nominal with equal jitter applied.
func (b backoff) delay(failures int) time.Duration {
	d := b.nominal(failures)
	if d <= 1 {
		return d
	}
	half := d / 2
	return d - half + time.Duration(b.rand(int64(half)+1))
}

// retryEntry is one object waiting for a retry.
type retryEntry[Obj any] struct {
	key      string
	obj      Obj              // for deletes: the deleted object, gone from the table
	rev      statedb.Revision // revision the failed attempt saw
	origRev  statedb.Revision // revision of the change that started the failures
	deleted  bool
	deferred bool // RetryAfter(d, nil): not a failure, the status stays Pending
	failures int  // consecutive failures so far
	due      time.Time
	// requestedAt is when the change being retried was written (zero:
	// unknown): the start of its realization latency.
	requestedAt time.Time

	dueIdx, revIdx int // positions in the two heaps
}

// retryQueue holds objects waiting for a retry, at most one entry per key.
// It costs O(log n) per operation and memory only for failing objects. Two
// heaps share the entries: one by due time (what to retry next), one by
// origRev (the retry low watermark for WaitUntilReconciled).
type retryQueue[Obj any] struct {
	byKey map[string]*retryEntry[Obj]
	byDue entryHeap[Obj]
	byRev entryHeap[Obj]

	// deferredUpdates counts the entries of objects still in the table
	// that were deferred (and so are still Pending).
	deferredUpdates int
}

func newRetryQueue[Obj any]() *retryQueue[Obj] {
	return &retryQueue[Obj]{
		byKey: map[string]*retryEntry[Obj]{},
		byDue: entryHeap[Obj]{
			less: func(a, b *retryEntry[Obj]) bool { return a.due.Before(b.due) },
			idx:  func(e *retryEntry[Obj]) *int { return &e.dueIdx },
		},
		byRev: entryHeap[Obj]{
			less: func(a, b *retryEntry[Obj]) bool { return a.origRev < b.origRev },
			idx:  func(e *retryEntry[Obj]) *int { return &e.revIdx },
		},
	}
}

// add schedules e, replacing any entry for the same key.
func (rq *retryQueue[Obj]) add(e *retryEntry[Obj]) {
	rq.remove(e.key)
	rq.byKey[e.key] = e
	rq.byDue.push(e)
	rq.byRev.push(e)
	if e.deferred && !e.deleted {
		rq.deferredUpdates++
	}
}

// remove drops the entry for key, if any.
func (rq *retryQueue[Obj]) remove(key string) {
	if len(rq.byKey) == 0 {
		return // the common case: nothing is failing
	}
	e, ok := rq.byKey[key]
	if !ok {
		return
	}
	delete(rq.byKey, key)
	rq.byDue.remove(e.dueIdx)
	rq.byRev.remove(e.revIdx)
	if e.deferred && !e.deleted {
		rq.deferredUpdates--
	}
}

func (rq *retryQueue[Obj]) len() int { return len(rq.byKey) }

// next returns when the earliest retry is due.
func (rq *retryQueue[Obj]) next() (time.Time, bool) {
	if len(rq.byDue.items) == 0 {
		return time.Time{}, false
	}
	return rq.byDue.items[0].due, true
}

// popDue removes and returns the earliest entry if it is due at now.
func (rq *retryQueue[Obj]) popDue(now time.Time) (*retryEntry[Obj], bool) {
	if len(rq.byDue.items) == 0 || rq.byDue.items[0].due.After(now) {
		return nil, false
	}
	e := rq.byDue.items[0]
	rq.remove(e.key)
	return e, true
}

// lowWatermark returns the lowest origRev of any entry.
func (rq *retryQueue[Obj]) lowWatermark() (statedb.Revision, bool) {
	if len(rq.byRev.items) == 0 {
		return 0, false
	}
	return rq.byRev.items[0].origRev, true
}

// entryHeap is a binary min-heap that records each entry's position, so any
// entry can be removed in O(log n).
type entryHeap[Obj any] struct {
	items []*retryEntry[Obj]
	less  func(a, b *retryEntry[Obj]) bool
	idx   func(*retryEntry[Obj]) *int
}

func (h *entryHeap[Obj]) push(e *retryEntry[Obj]) {
	h.items = append(h.items, e)
	*h.idx(e) = len(h.items) - 1
	h.up(len(h.items) - 1)
}

func (h *entryHeap[Obj]) remove(i int) {
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = nil
	h.items = h.items[:last]
	if i < last {
		if !h.down(i) {
			h.up(i)
		}
	}
}

func (h *entryHeap[Obj]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*h.idx(h.items[i]) = i
	*h.idx(h.items[j]) = j
}

func (h *entryHeap[Obj]) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(h.items[i], h.items[parent]) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

// down sifts i down and reports whether it moved.
func (h *entryHeap[Obj]) down(i int) bool {
	start := i
	n := len(h.items)
	for {
		smallest := i
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c < n && h.less(h.items[c], h.items[smallest]) {
				smallest = c
			}
		}
		if smallest == i {
			return i != start
		}
		h.swap(i, smallest)
		i = smallest
	}
}
