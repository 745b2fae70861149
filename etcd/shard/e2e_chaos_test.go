package shard

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// chaosDuration is how long the chaos test runs: 2 minutes by default,
// issue 20's row; CONVERGE_CHAOS (a duration: 30s, 10m) runs it shorter or
// longer.
func chaosDuration(t *testing.T) time.Duration {
	if v := os.Getenv("CONVERGE_CHAOS"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("CONVERGE_CHAOS=%q: %v", v, err)
		}
		return d
	}
	return 2 * time.Minute
}

// Row 6 of the fault table: replicas killed (SIGKILL), stopped (SIGTERM),
// paused past their lease (SIGSTOP, then SIGCONT) and restarted at random
// while the desired sizes churn so that every replica keeps operations in
// flight, and the paused ones send their writes when they resume whatever
// their context says. At the end the target equals the desired set (every
// group applied at its desired size by its slot's owner under the current
// claim); the fencing check refused the resumed
// replicas' stale writes (counted); no accepted write for a key was made
// under an older claim than an earlier accepted one (nothing applied out of
// order); and no two operations on one key overlapped.
func TestE2EChaos(t *testing.T) {
	names := []string{"r1", "r2", "r3", "r4"}
	// Calls take long enough, and the sizes churn fast enough, that a
	// pause or a kill almost always catches some in flight.
	flags := []string{"-call-time", "150ms", "-ignore-cancel"}
	f := startFleet(t, 1)
	for _, name := range names {
		f.start(t, name, flags...)
	}
	f.waitSettled(t, names, 60*time.Second)
	start := f.read(t)
	order := f.watchOrder(t, start.rev)
	stopChurn := f.churn(t, 20*time.Millisecond)

	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("CONVERGE_CHAOS_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("CONVERGE_CHAOS_SEED=%d replays this run's choices", seed)
	rng := rand.New(rand.NewPCG(seed, 20))
	deadline := time.Now().Add(chaosDuration(t))
	actions := map[string]int{}
	for time.Now().Before(deadline) {
		name := names[rng.IntN(len(names))]
		p := f.replicas[name]
		running := 0
		for _, q := range f.replicas {
			if q.Running() {
				running++
			}
		}
		switch {
		case !p.Running():
			f.start(t, name, flags...)
			actions["restart"]++
		case running <= 2:
			continue
		case rng.IntN(3) == 0:
			p.Kill()
			actions["kill"]++
		case rng.IntN(2) == 0:
			p.Stop()
			actions["stop"]++
		default:
			p.Pause()
			time.Sleep(e2eTTL + time.Second) // a pause past the lease
			p.Continue()
			actions["pause"]++
		}
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
	}
	stopChurn()
	for _, name := range names {
		if !f.replicas[name].Running() {
			f.start(t, name, flags...)
		}
	}
	f.waitSettled(t, names, 60*time.Second)
	s := f.read(t)
	t.Logf("actions %v; stale writes refused: %d", actions, s.stale)
	if len(s.overlaps) > 0 {
		t.Fatalf("overlapping operations recorded at the target: %v", s.overlaps)
	}
	if bad := order(); bad != "" {
		t.Fatal(bad)
	}
	if actions["pause"] > 0 && s.stale == 0 {
		t.Fatal("replicas resumed after a pause past their lease, and the target refused none of their writes")
	}
}

// watchOrder watches every accepted target write from rev on; the
// returned function reports a key whose writes went back to an older
// claim, or "".
func (f *fleet) watchOrder(t *testing.T, rev int64) func() string {
	ctx, cancel := context.WithCancel(context.Background())
	wch := f.cli.Watch(ctx, "/fleet/target/", clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	last := map[string]int64{}
	var bad string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for wr := range wch {
			for _, ev := range wr.Events {
				key := string(ev.Kv.Key)
				claim, _ := splitWrite(string(ev.Kv.Value))
				_, r, _ := strings.Cut(claim, "@")
				tokRev, _ := strconv.ParseInt(r, 10, 64)
				if tokRev < last[key] && bad == "" {
					bad = key + ": write under claim " + claim + " accepted after one under revision " + strconv.FormatInt(last[key], 10)
				}
				last[key] = max(last[key], tokRev)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() string { cancel(); <-done; return bad }
}
