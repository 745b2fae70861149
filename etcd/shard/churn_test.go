package shard

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/converge-go/converge/etcd/internal/etcdcluster"
)

// target stands in for a remote system and checks what matters: no two
// operations on one key ever run at once.
type target struct {
	mu       sync.Mutex
	active   map[string]string // key -> member running an op on it
	overlaps []string
	ops      atomic.Int64
}

func (tg *target) begin(key, member string) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if other, busy := tg.active[key]; busy {
		tg.overlaps = append(tg.overlaps, fmt.Sprintf("%s: %s and %s", key, other, member))
	}
	tg.active[key] = member
}

func (tg *target) end(key string) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	delete(tg.active, key)
	tg.ops.Add(1)
}

// work runs operations on random keys for as long as ctx lasts, each only
// under Acquire, each taking 10-30 ms (the remote call), as a reconciler's
// workers would.
// Like the engine, one incarnation never runs two operations on one key
// (busy); the target checks that incarnations never do either.
func work(ctx context.Context, m *Manager, incarnation string, busy *sync.Map, tg *target, seed uint64, wg *sync.WaitGroup) {
	defer wg.Done()
	rng := rand.New(rand.NewPCG(seed, 1))
	for ctx.Err() == nil {
		key := fmt.Sprintf("group-%d", rng.IntN(64))
		if _, taken := busy.LoadOrStore(key, true); taken {
			continue
		}
		opCtx, release, ok := m.Acquire(ctx, []byte(key))
		if !ok {
			busy.Delete(key)
			// Not ours: a reconciler would not have this key as work
			// at all. Yield, then look at another.
			select {
			case <-m.Changed():
			case <-time.After(time.Millisecond):
			case <-ctx.Done():
			}
			continue
		}
		tg.begin(key, incarnation)
		// The remote call: once sent, it runs its course whatever
		// happens to opCtx, as a real one does.
		_ = opCtx
		time.Sleep(time.Duration(10+rng.IntN(20)) * time.Millisecond)
		tg.end(key)
		release()
		busy.Delete(key)
	}
}

// Members join, stop cleanly and come back while every member keeps
// operating on the keys it owns: no two operations on one key overlap, and
// at the end the survivors own every slot as assigned.
func TestChurnNeverOverlapsOperations(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	cli := c.Client(t)
	tg := &target{active: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()

	names := []string{"a", "b", "d", "e"}
	live := map[string]*member{}
	start := func(name string, seed uint64) {
		m := startMember(t, cli, name, nil)
		live[name] = m
		mctx, mcancel := context.WithCancel(ctx)
		incarnation := fmt.Sprintf("%s#%d", name, seed)
		busy := &sync.Map{}
		wg.Add(4)
		for i := range 4 {
			go work(mctx, m.Manager, incarnation, busy, tg, seed*10+uint64(i), &wg)
		}
		stop := m.stop
		m.stop = func() { stop(); mcancel() }
	}
	start("a", 1)
	start("b", 2)
	rng := rand.New(rand.NewPCG(42, 42))
	for step := range 12 {
		name := names[rng.IntN(len(names))]
		if m, ok := live[name]; ok && len(live) > 1 {
			m.stop()
			delete(live, name)
		} else if !ok {
			start(name, uint64(100+step))
		}
		ms := make([]*member, 0, len(live))
		for _, m := range live {
			ms = append(ms, m)
		}
		waitUntil(t, ms, balanced(ms))
	}
	cancel()
	wg.Wait()
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if len(tg.overlaps) > 0 {
		t.Fatalf("%d overlapping operations, first: %s", len(tg.overlaps), tg.overlaps[0])
	}
	if tg.ops.Load() == 0 {
		t.Fatal("no operation ran: the check proved nothing")
	}
	t.Logf("%d operations, none overlapping", tg.ops.Load())
}
