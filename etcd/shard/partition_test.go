package shard

import (
	"testing"
	"time"

	"github.com/converge-go/converge/etcd/internal/netlab"
	"github.com/converge-go/converge/etcd/internal/watch"
)

// Finding 9 and row "peer-only partition" of the fault table, sharded: a
// member whose group watch is served by an etcd member cut off from its
// peers (but not from its clients) takes over a leaver's slots within one
// RetryInterval plus the watch's reconnect bound (two silences) of the
// leaver's clean stop.
func TestSurvivorTakesOverBehindPeerOnlyPartition(t *testing.T) {
	lab := netlab.New(t) // fails under CI=true where it cannot run
	ec := lab.StartEtcd(t, 3)
	client := lab.Node("client")
	long := func(cfg *Config) { cfg.TTL = 5 * time.Second }
	// The leaver reaches member 0 only, so that its own watch is there
	// and its clean stop reaches a member with a leader.
	a := startMember(t, client.Client(t, ec.Endpoints[0]), "a", long)
	survivorCli := client.Client(t, ec.Endpoints...)
	var b *member
	cut := -1
	for try := 0; cut < 0; try++ {
		if try == 10 {
			t.Fatal("the survivor's watch never landed on member 1 or 2")
		}
		b = startMember(t, survivorCli, "b", long)
		cut = ec.ServingWatch(t, client, 2, 0)
		if cut < 0 {
			b.stop()
		}
	}
	both := []*member{a, b}
	waitUntil(t, both, balanced(both))
	t.Logf("the survivor's watch is served by member %d; cutting it from its peers", cut)
	// A follower: cutting the etcd leader adds etcd's own election to
	// the takeover (the fault table's row of its own).
	ec.MakeFollower(t, client, cut)
	ec.CutPeers(cut)
	ec.WaitNoLeader(t, client, cut)
	stopped := time.Now()
	a.stop()
	deadline := time.After(10 * time.Second)
	for ch := b.Changed(); len(b.Owned()) < testSlots; ch = b.Changed() {
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("the survivor owns %d of %d slots 10s after the leaver's clean stop behind a peer-only partition", len(b.Owned()), testSlots)
		}
	}
	took := time.Since(stopped)
	bound := b.cfg.RetryInterval + 2*watch.DefaultSilence
	t.Logf("survivor owns every slot %v after the leaver's clean stop (bound %v)", took, bound)
	if took > bound {
		t.Fatalf("survivor took the slots %v after the clean stop, want within %v", took, bound)
	}
}
