package shard

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/converge-go/converge/etcd/internal/etcdcluster"
	"github.com/converge-go/converge/reconciler"
)

// BenchmarkCoordinationCost measures issue 20's coordination row: the
// etcd writes per second of three replicas at steady state, with 10k and
// with 1M objects. Each replica asks Owns for every one of the objects in
// a loop (what the reconciler does for every change it reads) and reports
// counts that change all the time; the writes are the summaries,
// republished at most every SummaryInterval (1 s here, 10 s by default),
// whatever the number of objects.
//
//	go test -run '^$' -bench CoordinationCost -benchtime 1x ./shard
func BenchmarkCoordinationCost(b *testing.B) {
	for _, objects := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("objects=%d", objects), func(b *testing.B) {
			for b.Loop() {
				coordinationCost(b, objects)
			}
		})
	}
}

func coordinationCost(b *testing.B, objects int) {
	const window = 5 * time.Second
	c := etcdcluster.Start(b, 1)
	cli := c.Client(b)
	keys := make([][]byte, objects)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "object-%d", i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var ms []*member
	var asked atomic.Int64
	for _, name := range []string{"a", "b", "d"} {
		var owned atomic.Int64
		m := startMember(b, cli, name, func(cfg *Config) {
			cfg.SummaryInterval = time.Second
			cfg.Report = func() Report {
				return Report{Objects: reconciler.ObjectCounts{Done: int(owned.Load())}}
			}
		})
		ms = append(ms, m)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				n := 0
				for _, k := range keys {
					if m.Owns(k) {
						n++
					}
				}
				asked.Add(int64(len(keys)))
				owned.Store(int64(n) + time.Now().UnixNano()%7) // counts that keep changing
			}
		}()
	}
	waitUntil(b, ms, balanced(ms))
	st0, err := cli.Status(ctx, c.Endpoints()[0])
	if err != nil {
		b.Fatal(err)
	}
	asked0 := asked.Load()
	time.Sleep(window) // the measured window
	st1, err := cli.Status(ctx, c.Endpoints()[0])
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(st1.Header.Revision-st0.Header.Revision)/window.Seconds(), "etcd-writes/s")
	b.ReportMetric(float64(asked.Load()-asked0)/window.Seconds(), "Owns/s")
}
