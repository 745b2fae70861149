package shard

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkFailoverSIGKILL measures issue 20's failover row with real
// processes: three replicas at TTL 5 s; one is killed with SIGKILL; the
// time until the first operation of a new owner on one of its keys lands
// at the target. Goal: at most TTL + 2 s. Run as root:
//
//	go test -run '^$' -bench FailoverSIGKILL -benchtime 3x ./shard
func BenchmarkFailoverSIGKILL(b *testing.B) {
	const ttl = 5 * time.Second
	var worst time.Duration
	var total time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		f := startFleet(b, 1)
		names := []string{"r1", "r2", "r3"}
		for _, name := range names {
			f.start(b, name, "-ttl", ttl.String())
		}
		f.waitSettled(b, names, 60*time.Second)
		before := f.read(b)
		victimKeys := map[string]bool{}
		for k := range e2eKeys {
			key := "group-" + strconv.Itoa(k)
			if before.claims[SlotOf([]byte(key), e2eSlots)] == "r2" {
				victimKeys["/fleet/target/"+key] = true
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*ttl+10*time.Second)
		wch := f.cli.Watch(ctx, "/fleet/target/", clientv3.WithPrefix(), clientv3.WithRev(before.rev+1))
		b.StartTimer()

		killed := time.Now()
		f.replicas["r2"].Kill()
		took := firstTakeoverWrite(b, wch, victimKeys).Sub(killed)
		cancel()
		total += took
		worst = max(worst, took)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/failover")
	b.ReportMetric(float64(worst.Milliseconds()), "ms-worst")
	b.ReportMetric(float64(ttl.Milliseconds()), "ms-TTL")
}

// firstTakeoverWrite returns when the first write by another replica to
// one of keys arrived, by the time carried in its value.
func firstTakeoverWrite(b *testing.B, wch clientv3.WatchChan, keys map[string]bool) time.Time {
	for wr := range wch {
		for _, ev := range wr.Events {
			claim, at := splitWrite(string(ev.Kv.Value))
			if keys[string(ev.Kv.Key)] && !strings.HasPrefix(claim, "r2@") {
				return at
			}
		}
	}
	b.Fatal("no new owner wrote one of the killed replica's keys")
	return time.Time{}
}
