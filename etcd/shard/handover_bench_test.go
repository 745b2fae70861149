package shard

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/converge-go/converge/etcd/internal/etcdcluster"
)

// BenchmarkGracefulHandover measures issue 20's handover row: three
// members keep operations of 10-30 ms in flight on the keys they own
// (in-process, embedded etcd); one member stops cleanly and comes back,
// again and again; for every slot that moves, the time from the stop (or
// the start) until its new owner owns it, the drain of its operations in
// flight included. Goal: p99 at most 1 s.
//
//	go test -run '^$' -bench GracefulHandover -benchtime 10x ./shard
func BenchmarkGracefulHandover(b *testing.B) {
	c := etcdcluster.Start(b, 1)
	cli := c.Client(b)
	tg := &target{active: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	startWorking := func(name string, seed uint64) *member {
		m := startMember(b, cli, name, nil)
		mctx, mcancel := context.WithCancel(ctx)
		busy := &sync.Map{}
		wg.Add(4)
		for i := range 4 {
			go work(mctx, m.Manager, fmt.Sprintf("%s#%d", name, seed), busy, tg, seed*10+uint64(i), &wg)
		}
		stop := m.stop
		m.stop = func() { stop(); mcancel() }
		return m
	}
	a, d := startWorking("a", 1), startWorking("b", 2)
	ms := []*member{a, d}
	waitUntil(b, ms, balanced(ms))

	var took []time.Duration
	for i := 0; b.Loop(); i++ {
		var e *member
		took = append(took, moves(b, ms, func() []*member {
			e = startWorking("e", uint64(10+i))
			return []*member{a, d, e}
		})...)
		took = append(took, moves(b, []*member{a, d, e}, func() []*member {
			go e.stop() // measured from the stop's start: the drain counts
			return ms
		})...)
	}
	slices.Sort(took)
	p := func(q float64) float64 { return float64(took[int(q*float64(len(took)-1))].Microseconds()) / 1000 }
	b.ReportMetric(p(0.5), "ms-p50")
	b.ReportMetric(p(0.99), "ms-p99")
	b.ReportMetric(float64(len(took))/float64(b.N), "slots-moved/op")
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if len(tg.overlaps) > 0 {
		b.Fatalf("overlapping operations: %v", tg.overlaps[0])
	}
}

// moves runs change, which returns the members after it, waits until
// they are balanced, and returns for every slot whose owner changed how
// long after the start of change its new owner owned it.
func moves(b *testing.B, before []*member, change func() []*member) []time.Duration {
	prev := ownersOf(before)
	start := time.Now()
	ms := change()
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Name()
	}
	slices.Sort(names)
	owned := map[int]time.Duration{}
	deadline := time.After(within)
	for {
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline)}}
		for _, m := range ms {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(m.Changed())})
		}
		for _, m := range ms {
			for _, s := range m.Owned() {
				if _, seen := owned[s]; !seen && prev[s] != m.Name() && Assign(s, names) == m.Name() {
					owned[s] = time.Since(start)
				}
			}
		}
		if balanced(ms)() == "" {
			break
		}
		if i, _, _ := reflect.Select(cases); i == 0 {
			b.Fatalf("not balanced within %v", within)
		}
	}
	out := make([]time.Duration, 0, len(owned))
	for _, d := range owned {
		out = append(out, d)
	}
	return out
}
