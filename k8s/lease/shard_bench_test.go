package lease_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/converge-go/converge/internal/slots"
	"github.com/converge-go/converge/k8s/lease"
)

// benchShardConfig is the defaults (LeaseDuration 15 s, RenewDeadline
// 10 s, 64 slots) but for a RetryPeriod of 500 ms, so that joins settle
// quickly: on a loaded machine the tests' 1 s deadline would lapse.
func benchShardConfig(c *lease.ShardConfig) {
	c.Slots, c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = lease.DefaultSlots, 0, 0, 500*time.Millisecond
}

// busiest returns the largest share of n keys (named as the benchmark
// names them) that the assignment over ids gives one member: the work
// rate follows it.
func busiest(ids []string, n int) float64 {
	count := map[string]int{}
	for i := range n {
		k := fmt.Sprintf("round-0-key-%d", i)
		count[slots.Assign(slots.Of([]byte(k), lease.DefaultSlots), ids)]++
	}
	most := 0
	for _, c := range count {
		most = max(most, c)
	}
	return float64(most) / float64(n)
}

// spans counts the claims the members made so far.
func spans(ms []*member) int {
	n := 0
	for _, m := range ms {
		n += len(m.s.Spans())
	}
	return n
}

// countWrites counts the Lease writes (create, update, delete) the
// sharders send.
type countWrites struct {
	next   http.RoundTripper
	writes *atomic.Int64
}

func (c countWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		c.writes.Add(1)
	}
	return c.next.RoundTrip(req)
}

// BenchmarkShardWorkRate is the work rate of 1, 2 and 3 sharded replicas
// on one API server: every replica's table holds benchObjects objects,
// each Update is a remote call of benchLatency, four at a time per
// replica, and the replicas split the keys with Leases (benchShardConfig).
// The rate is objects reconciled a second, from the insert until every
// object is done; lease-writes/s is the coordination's writes meanwhile,
// and claims/op the slots claimed meanwhile (0 unless a membership
// lapsed).
func BenchmarkShardWorkRate(b *testing.B) {
	const benchObjects, benchLatency = 3000, 5 * time.Millisecond
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("replicas-%d", n), func(b *testing.B) {
			group := newLeaseName(b)
			tg := &slotTarget{changed: make(chan struct{})}
			var writes atomic.Int64
			cfg := srv.Config()
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countWrites{rt, &writes} })
			var engines []*shardedEngine
			var members []*member
			var ids []string
			for i := range n {
				id := fmt.Sprintf("r%d", i)
				m := startMember(b, rest.CopyConfig(cfg), group, id, benchShardConfig)
				members, ids = append(members, m), append(ids, id)
				engines = append(engines, startShardedEngineWith(b, m, slotOps{name: id, tg: tg, latency: benchLatency}))
			}
			waitOwners(b, members, assignedOf(lease.DefaultSlots, ids))
			round, claims := 0, 0
			var took time.Duration
			var wrote int64
			for b.Loop() {
				claims -= spans(members)
				keys := make([]string, benchObjects)
				for i := range keys {
					keys[i] = fmt.Sprintf("round-%d-key-%d", round, i)
				}
				round++
				tg.mu.Lock()
				base := tg.updates
				tg.mu.Unlock()
				w0, start := writes.Load(), time.Now()
				for _, e := range engines {
					e.insert(b, keys)
				}
				tg.wait(b, "every object updated", func([]slotOp) bool { return tg.updates-base >= benchObjects })
				took += time.Since(start)
				wrote += writes.Load() - w0
				claims += spans(members)
			}
			b.ReportMetric(float64(benchObjects*b.N)/took.Seconds(), "objects/s")
			b.ReportMetric(float64(wrote)/took.Seconds(), "lease-writes/s")
			b.ReportMetric(float64(claims)/float64(b.N), "claims/op")
			b.ReportMetric(busiest(ids, benchObjects), "busiest-share")
		})
	}
}
