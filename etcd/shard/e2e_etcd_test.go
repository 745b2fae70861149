package shard

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
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

// longestPause stops the replicas cleanly and returns the longest pause
// between two accepted writes any of them saw: with -refresh their writes
// never stop otherwise.
func (f *fleet) longestPause(t *testing.T, names []string) time.Duration {
	t.Helper()
	var longest time.Duration
	for _, name := range names {
		p := f.replicas[name]
		p.Stop()
		line, ok := p.LineWith("longest pause ")
		if !ok {
			t.Fatalf("%s did not report its longest pause", name)
		}
		ns, err := strconv.ParseInt(strings.TrimPrefix(line, "longest pause "), 10, 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", name, line, err)
		}
		longest = max(longest, time.Duration(ns))
	}
	return longest
}

// etcdFault runs one etcd fault under three replicas that keep operations
// in flight, and checks that nothing of the fleet notices beyond a pause:
// no replica drops its slots, every claim keeps its token (no slot moved
// or was claimed anew) for a whole TTL after the fault, and every key is
// still reconciled by its owner.
func etcdFault(t *testing.T, fault func(f *fleet, leader int)) {
	const ttl = 5 * time.Second
	f := startFleet(t, 3)
	names := []string{"r1", "r2", "r3"}
	for _, name := range names {
		f.start(t, name, "-refresh", "100ms", "-op", "20ms", "-ttl", ttl.String())
	}
	f.waitSettled(t, names, 60*time.Second)
	before := f.read(t)

	fault(f, f.etcdLeader(t))
	// A whole TTL: had any lease been in doubt, its replica would have
	// dropped its slots within it.
	time.Sleep(ttl)
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
	// One etcd election (200 ms election timeout here) plus the replica's
	// client noticing that its member is gone (1 s keepalive + 1 s
	// timeout). The bound that matters: the pause must end before any
	// lease is in doubt (TTL minus the 1 s margin).
	pause := f.longestPause(t, names)
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
