package leader

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/fencing"
	"github.com/converge-go/converge/etcd/internal/etcdcluster"
)

// Stopping the etcd leader of a three-member cluster (embed's Close, which
// hands raft leadership to a peer first; a crash or a partition of the etcd
// leader needs real processes) does not end the term:
// the token stays valid once a new etcd leader serves, and leadership does
// not change for a whole TTL after the kill.
func TestEtcdLeaderStoppedKeepsTheTerm(t *testing.T) {
	c := etcdcluster.Start(t, 3)
	cli := c.Client(t)
	a, _ := startElector(t, cli, "a", 3*time.Second)
	b, _ := startElector(t, cli, "b", 3*time.Second)
	first := waitOneLeader(t, a, b)
	tok, _ := first.Token()
	chA, chB := a.Changed(), b.Changed()

	c.Stop(c.WaitLeader(t))
	c.WaitLeader(t)
	ctx, cancel := context.WithTimeout(fencing.WithToken(context.Background(), tok), within)
	defer cancel()
	if err := fencing.Do(ctx, cli, clientv3.OpPut("/target/x", "after")); err != nil {
		t.Fatalf("fenced write of the leader after the etcd leader stopped: %v", err)
	}
	select {
	case <-chA:
		t.Fatalf("a's leadership changed after the etcd leader stopped (a leading: %v)", a.Leading())
	case <-chB:
		t.Fatalf("b's leadership changed after the etcd leader stopped (b leading: %v)", b.Leading())
	case <-time.After(3 * time.Second):
	}
	if now, _ := first.Token(); now != tok {
		t.Fatalf("token changed: %s -> %s", tok, now)
	}
}
