package shard

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/leader"
)

// The process-level tests of leader-only replicas (package leader) share
// this package's process harness: the same fleet controller, with
// -leader-only, applies every group while it leads.

// leaderSettled reports what is still wrong for: the election led by one
// of live, and every group applied at its desired size by the leader
// under its term's token.
func (f *fleet) leaderSettled(t testing.TB, live []string) string {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	resp, err := f.cli.Get(ctx, "/fleet/leader/", append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return "no leader"
	}
	name, rev := string(resp.Kvs[0].Value), resp.Kvs[0].CreateRevision
	ok := false
	for _, l := range live {
		ok = ok || l == name
	}
	if !ok {
		return fmt.Sprintf("leader %q is not one of %v", name, live)
	}
	s := f.read(t)
	for i := range e2eKeys {
		key := groupKey(i)
		if want := fmt.Sprintf("%s@%d", name, rev); s.target[key] != want {
			return fmt.Sprintf("%s last applied under %q, want %q", key, s.target[key], want)
		}
		if s.sizes[key] != s.desired[key] {
			return fmt.Sprintf("%s applied at size %d, desired %d", key, s.sizes[key], s.desired[key])
		}
	}
	return ""
}

func (f *fleet) waitLeaderSettled(t *testing.T, live []string, bound time.Duration) (string, time.Duration) {
	t.Helper()
	took := f.waitFor(t, bound, func(state) string { return f.leaderSettled(t, live) })
	resp, err := f.cli.Get(context.Background(), "/fleet/leader/", append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...)
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("leader vanished: %v", err)
	}
	return string(resp.Kvs[0].Value), took
}

// firstWriteBy returns a channel that receives when replica's first write
// after revision rev was sent (by the time it carries).
func (f *fleet) firstWriteBy(t *testing.T, replica string, rev int64) <-chan time.Time {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	wch := f.cli.Watch(ctx, "/fleet/target/", clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	first := make(chan time.Time, 1)
	go func() {
		for wr := range wch {
			for _, ev := range wr.Events {
				if a := parseApplied(ev.Kv.Value); a.Replica == replica {
					first <- time.Unix(0, a.At)
					cancel()
					return
				}
			}
		}
	}()
	return first
}

// Leader-only replicas as processes. The leader is killed with SIGKILL:
// the standby leads and has applied every group under its own term within
// TTL + 2 s. Then the new leader stops cleanly: the restarted old one
// makes its first write within one retry interval (it resigned: nobody
// waits for a TTL) and has applied every group within 2 s. No operation
// overlapped.
func TestE2ELeaderOnlyKilledThenStopped(t *testing.T) {
	f := startFleet(t, 1)
	flags := []string{"-leader-only", "-call-time", "20ms"}
	for _, name := range []string{"r1", "r2"} {
		f.start(t, name, flags...)
	}
	first, _ := f.waitLeaderSettled(t, []string{"r1", "r2"}, 60*time.Second)
	second := map[string]string{"r1": "r2", "r2": "r1"}[first]

	f.replicas[first].Kill()
	_, took := f.waitLeaderSettled(t, []string{second}, e2eTTL+2*time.Second)
	t.Logf("leader %s SIGKILLed: %s leads and applied every group after %v (TTL %v)", first, second, took, e2eTTL)

	f.start(t, first, flags...)
	// The restarted replica is a warm standby once its table is fed.
	f.replicas[first].WaitLine("table ready", within)
	wrote := f.firstWriteBy(t, first, f.read(t).rev)
	start := time.Now()
	f.replicas[second].Stop()
	f.waitLeaderSettled(t, []string{first}, 2*time.Second-time.Since(start))
	t.Logf("leader %s stopped cleanly: %s leads and applied every group after %v", second, first, time.Since(start))
	at := <-wrote
	if d := at.Sub(start); d > leader.DefaultRetryInterval {
		t.Fatalf("first write of the new leader %v after the clean stop, more than one retry interval (%v)", d, leader.DefaultRetryInterval)
	} else {
		t.Logf("first write of the new leader %v after the clean stop", d)
	}
	if s := f.read(t); len(s.overlaps) > 0 {
		t.Fatalf("overlapping operations recorded at the target: %v", s.overlaps)
	}
}
