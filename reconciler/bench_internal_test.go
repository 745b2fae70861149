package reconciler

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/statedb"
)

// benchRetryEntries returns n entries with distinct keys, due times spread
// over a second in random order (as jittered backoffs are) and increasing
// origRevs.
func benchRetryEntries(n int) []*retryEntry[int] {
	rnd := rand.New(rand.NewPCG(1, 2))
	base := time.Now()
	entries := make([]*retryEntry[int], n)
	for i := range entries {
		entries[i] = &retryEntry[int]{
			key:     "object-" + strconv.Itoa(i),
			obj:     i,
			rev:     statedb.Revision(i + 1),
			origRev: statedb.Revision(i + 1),
			due:     base.Add(time.Duration(rnd.Int64N(int64(time.Second)))),
		}
	}
	return entries
}

// BenchmarkRetryQueueAddPopDue fills the retry queue with n failing
// objects and pops them all as they come due: the path of a target outage
// and its recovery.
func BenchmarkRetryQueueAddPopDue(b *testing.B) {
	for _, n := range []int{100, 10_000, 100_000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			entries := benchRetryEntries(n)
			rq := newRetryQueue[int]()
			end := time.Now().Add(2 * time.Second)
			b.ReportAllocs()
			for b.Loop() {
				for _, e := range entries {
					rq.add(e)
				}
				for {
					if _, ok := rq.popDue(end); !ok {
						break
					}
				}
			}
			if rq.len() != 0 {
				b.Fatalf("%d entries left", rq.len())
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "objects/sec")
		})
	}
}

// BenchmarkRetryQueueRemove fills the retry queue and then removes every
// entry by key, in random order: the path of objects that change (or are
// deleted) while waiting for a retry.
func BenchmarkRetryQueueRemove(b *testing.B) {
	for _, n := range []int{100, 10_000, 100_000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			entries := benchRetryEntries(n)
			keys := make([]string, n)
			for i, e := range entries {
				keys[i] = e.key
			}
			rand.New(rand.NewPCG(3, 4)).Shuffle(n, func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			rq := newRetryQueue[int]()
			b.ReportAllocs()
			for b.Loop() {
				for _, e := range entries {
					rq.add(e)
				}
				for _, k := range keys {
					rq.remove(k)
				}
			}
			if rq.len() != 0 {
				b.Fatalf("%d entries left", rq.len())
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "objects/sec")
		})
	}
}

// BenchmarkRetryQueueReschedule replaces the entry of every key in a full
// queue: the path of a retry that fails again.
func BenchmarkRetryQueueReschedule(b *testing.B) {
	for _, n := range []int{100, 10_000, 100_000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			entries := benchRetryEntries(n)
			again := benchRetryEntries(n)
			rq := newRetryQueue[int]()
			for _, e := range entries {
				rq.add(e)
			}
			b.ReportAllocs()
			for b.Loop() {
				for _, e := range again {
					rq.add(e)
				}
				entries, again = again, entries
			}
			if rq.len() != n {
				b.Fatalf("%d entries, want %d", rq.len(), n)
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "objects/sec")
		})
	}
}
