package shard

import (
	"context"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdLeader returns the index of the etcd member that leads now.
func (f *fleet) etcdLeader(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for i, ep := range f.endpoints {
		st, err := f.cli.Status(ctx, ep)
		if err == nil && st.Leader == st.Header.MemberId {
			return i
		}
	}
	t.Fatal("no etcd member says it leads")
	return -1
}

// watchApplied collects the time of every write the replicas applied at
// the target after revision rev; the returned function stops and returns
// them in order.
func (f *fleet) watchApplied(t *testing.T, rev int64) func() []time.Time {
	ctx, cancel := context.WithCancel(context.Background())
	wch := f.cli.Watch(ctx, "/fleet/target/", clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithCreatedNotify())
	// Established before the fault: a watch still being created when its
	// member dies can hang.
	if wr := <-wch; !wr.Created {
		t.Fatalf("watch of the target: %v", wr.Err())
	}
	var ats []time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		for wr := range wch {
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut {
					ats = append(ats, time.Unix(0, parseApplied(ev.Kv.Value).At))
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() []time.Time {
		cancel()
		<-done
		slices.SortFunc(ats, time.Time.Compare)
		return ats
	}
}

// longestGap returns the longest time between two successive writes of
// ats (sorted) from from to to.
func longestGap(ats []time.Time, from, to time.Time) time.Duration {
	var longest time.Duration
	last := from
	for _, at := range ats {
		if at.Before(from) {
			continue
		}
		if at.After(to) {
			break
		}
		longest = max(longest, at.Sub(last))
		last = at
	}
	return max(longest, to.Sub(last))
}

// etcdFault runs one etcd fault under three replicas that keep operations
// in flight (the desired sizes churn), and checks that nothing of the
// fleet notices beyond a pause: no replica drops its slots, every claim
// keeps its token (no slot moved or was claimed anew) for a whole TTL
// after the fault, and every group is still applied by its owner.
func etcdFault(t *testing.T, fault func(f *fleet, leader int)) {
	const ttl = 5 * time.Second
	f := startFleet(t, 3)
	names := []string{"r1", "r2", "r3"}
	for _, name := range names {
		f.start(t, name, "-call-time", "20ms", "-ttl", ttl.String())
	}
	f.waitSettled(t, names, 60*time.Second)
	before := f.read(t)
	stopChurn := f.churn(t, 20*time.Millisecond)
	writes := f.watchApplied(t, before.rev)

	faultAt := time.Now()
	fault(f, f.etcdLeader(t))
	// A whole TTL: had any lease been in doubt, its replica would have
	// dropped its slots within it.
	time.Sleep(ttl)
	window := time.Now()
	stopChurn()
	f.waitSettled(t, names, 30*time.Second)
	after := f.read(t)
	if !mapsEqual(before.claims, after.claims) || !mapsEqual(before.tokens, after.tokens) {
		t.Fatalf("claims changed across the etcd fault:\nbefore %v %v\nafter  %v %v", before.claims, before.tokens, after.claims, after.tokens)
	}
	for _, name := range names {
		if f.replicas[name].Printed("owned 0") {
			t.Fatalf("%s dropped its slots during the etcd fault", name)
		}
	}
	if len(after.overlaps) > 0 {
		t.Fatalf("overlapping operations recorded at the target: %v", after.overlaps)
	}
	// One etcd election (200 ms election timeout here) plus the clients
	// moving to another member: a call stuck on a partitioned member
	// waits for its own deadline (the test's writer of desired sizes
	// gives up after 1 s). The bound that matters: the pause must end
	// before any lease is in doubt (TTL minus the 1 s margin).
	pause := longestGap(writes(), faultAt, window)
	t.Logf("longest pause of target writes: %v", pause)
	if pause >= ttl-time.Second {
		t.Fatalf("writes paused for %v, as long as a lease's safety window", pause)
	}
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Row 4 of the fault table: one of three etcd members, the raft leader,
// killed with SIGKILL.
func TestE2EEtcdMemberKilled(t *testing.T) {
	etcdFault(t, func(f *fleet, leader int) {
		f.etcdProcs[leader].Kill()
	})
}

// Row 5: the etcd leader partitioned from its peers, the replicas and the
// test's client by an nftables drop in its namespace.
func TestE2EEtcdLeaderPartitioned(t *testing.T) {
	etcdFault(t, func(f *fleet, leader int) {
		var others []string
		for i, n := range f.etcd {
			if i != leader {
				others = append(others, n.IP)
			}
		}
		for _, n := range f.nodes {
			others = append(others, n.IP)
		}
		others = append(others, f.client.IP)
		slices.Sort(others)
		f.etcd[leader].Cut(others...)
	})
}
