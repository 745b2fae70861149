package leader

import (
	"testing"
	"time"

	"github.com/converge-go/converge/etcd/internal/netlab"
	"github.com/converge-go/converge/etcd/internal/watch"
)

// Finding 8 and row "peer-only partition" of the fault table: a standby
// whose wait for the leader's key is served by an etcd member cut off from
// its peers (but not from its clients) takes over after the leader's clean
// stop within one RetryInterval plus the watch's reconnect bound (two
// silences), not only once the partition heals.
func TestStandbyTakesOverBehindPeerOnlyPartition(t *testing.T) {
	lab := netlab.New(t) // fails under CI=true where it cannot run
	ec := lab.StartEtcd(t, 3)
	client := lab.Node("client")
	// The leader reaches member 0 only, so that its own watch is there
	// and its clean stop reaches a member with a leader.
	a, stopA := startElector(t, client.Client(t, ec.Endpoints[0]), "a", 2*time.Second)
	waitLeading(t, a, true)
	standbyCli := client.Client(t, ec.Endpoints...)
	// Start the standby until its wait for a's key is served by member 1
	// or 2: the client's round robin decides where a stream goes.
	var b *Elector
	cut := -1
	for try := 0; cut < 0; try++ {
		if try == 10 {
			t.Fatal("the standby's watch never landed on member 1 or 2")
		}
		var stopB func()
		b, stopB = startElector(t, standbyCli, "b", 2*time.Second)
		cut = ec.ServingWatch(t, client, 2, 0)
		if cut < 0 {
			stopB()
		}
	}
	t.Logf("the standby's watch is served by member %d; cutting it from its peers", cut)
	// A follower: cutting the etcd leader adds etcd's own election to
	// the takeover (the fault table's row of its own).
	ec.MakeFollower(t, client, cut)
	ec.CutPeers(cut)
	ec.WaitNoLeader(t, client, cut)
	stopped := time.Now()
	stopA()
	// The old code stays blind for as long as the partition lasts.
	deadline := time.After(10 * time.Second)
	for ch := b.Changed(); !b.Leading(); ch = b.Changed() {
		select {
		case <-ch:
		case <-deadline:
			t.Fatal("the standby did not lead within 10s of the clean stop behind a peer-only partition")
		}
	}
	took := time.Since(stopped)
	bound := b.cfg.RetryInterval + 2*watch.DefaultSilence
	t.Logf("standby leading %v after the leader's clean stop (bound %v)", took, bound)
	if !b.Leading() || took > bound {
		t.Fatalf("standby leading %v after the clean stop behind a peer-only partition, want within %v", took, bound)
	}
}
