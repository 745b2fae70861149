package shard

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The process-level tests of leader-only replicas (package leader) share
// this package's process harness: the same replica program, with
// -leader-only, owns every key while it leads.

// leaderSettled reports what is still wrong for: the election led by one
// of live, and every key written by it under its term's token.
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
		key := "group-" + strconv.Itoa(i)
		if want := fmt.Sprintf("%s@%d", name, rev); s.target[key] != want {
			return fmt.Sprintf("%s last written as %q, want %q", key, s.target[key], want)
		}
	}
	return ""
}

func (f *fleet) waitLeaderSettled(t *testing.T, live []string, bound time.Duration) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	wch := f.cli.Watch(ctx, "/fleet/", clientv3.WithPrefix())
	for {
		msg := f.leaderSettled(t, live)
		if msg == "" {
			resp, err := f.cli.Get(context.Background(), "/fleet/leader/", append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...)
			if err != nil || len(resp.Kvs) == 0 {
				t.Fatalf("leader vanished: %v", err)
			}
			return string(resp.Kvs[0].Value), time.Since(start)
		}
		select {
		case <-wch:
		case <-ctx.Done():
			t.Fatalf("leader-only fleet not settled within %v: %s", bound, msg)
		}
	}
}

// Leader-only replicas as processes: the leader is killed with SIGKILL and
// the standby leads and has rewritten every key under its own term within
// TTL + 2 s; then the new leader stops cleanly and the restarted old one
// takes over within 2 s, not a TTL. No operation overlapped.
func TestE2ELeaderOnlyKilledThenStopped(t *testing.T) {
	f := startFleet(t, 1)
	flags := []string{"-leader-only", "-refresh", "100ms", "-op", "20ms"}
	for _, name := range []string{"r1", "r2"} {
		f.start(t, name, flags...)
	}
	first, _ := f.waitLeaderSettled(t, []string{"r1", "r2"}, 60*time.Second)
	second := map[string]string{"r1": "r2", "r2": "r1"}[first]

	f.replicas[first].Kill()
	_, took := f.waitLeaderSettled(t, []string{second}, e2eTTL+2*time.Second)
	t.Logf("leader %s SIGKILLed: %s leads and rewrote every key after %v (TTL %v)", first, second, took, e2eTTL)

	f.start(t, first, flags...)
	start := time.Now()
	f.replicas[second].Stop()
	f.waitLeaderSettled(t, []string{first}, 2*time.Second-time.Since(start))
	t.Logf("leader %s stopped cleanly: %s leads and rewrote every key after %v", second, first, time.Since(start))
	if s := f.read(t); len(s.overlaps) > 0 {
		t.Fatalf("overlapping operations recorded at the target: %v", s.overlaps)
	}
}
