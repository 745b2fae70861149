package lease_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/converge-go/converge/k8s/lease"
)

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
// replica, and the replicas split the keys with Leases (64 slots). The
// rate is objects reconciled a second, from the insert until every
// object is done; lease-writes/s is the coordination's writes meanwhile.
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
				m := startMember(b, rest.CopyConfig(cfg), group, id, func(c *lease.ShardConfig) { c.Slots = lease.DefaultSlots })
				members, ids = append(members, m), append(ids, id)
				engines = append(engines, startShardedEngineWith(b, m, slotOps{name: id, tg: tg, latency: benchLatency}))
			}
			waitOwners(b, members, assignedOf(lease.DefaultSlots, ids))
			round := 0
			var took time.Duration
			var wrote int64
			for b.Loop() {
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
			}
			b.ReportMetric(float64(benchObjects*b.N)/took.Seconds(), "objects/s")
			b.ReportMetric(float64(wrote)/took.Seconds(), "lease-writes/s")
		})
	}
}
