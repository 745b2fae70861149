package shard

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Row 1 of issue 20's fault table: a replica killed with SIGKILL. Its
// slots are owned again, and its keys reconciled by their new owners,
// within TTL + 2 s; no two operations on one key overlapped.
func TestE2EReplicaKilled(t *testing.T) {
	f := startFleet(t, 1, "r1", "r2", "r3")
	f.waitSettled(t, []string{"r1", "r2", "r3"}, 60*time.Second)

	f.replicas["r2"].Kill()
	took := f.waitSettled(t, []string{"r1", "r3"}, e2eTTL+2*time.Second)
	t.Logf("r2 SIGKILLed: its slots owned again and its keys reconciled after %v (TTL %v)", took, e2eTTL)
	if s := f.read(t); len(s.overlaps) > 0 {
		t.Fatalf("overlapping operations recorded at the target: %v", s.overlaps)
	}
}

// Row 3 of the fault table: a replica cut off from etcd by an nftables
// drop in its namespace. It stops operating (owns nothing, its operations
// cancelled) before any other replica can take one of its slots, that is
// before its lease expired; the others take over within TTL + 2 s; once it
// is back, the target accepts no write under its old tokens, and it gets
// its share again.
//
// The desired sizes churn, so that r2 has operations in flight all the
// time; its calls take 300 ms and its writes ignore cancellation
// (-ignore-cancel), as a paused process's would: the writes it sent
// during the cut arrive after it, under old tokens, and the target must
// refuse every one (the test expects at least one and counts them).
func TestE2EReplicaCutOff(t *testing.T) {
	f := startFleet(t, 1, "r1", "r3")
	f.start(t, "r2", "-call-time", "300ms", "-ignore-cancel")
	all := []string{"r1", "r2", "r3"}
	f.waitSettled(t, all, 60*time.Second)
	before := f.read(t)
	stopChurn := f.churn(t, 20*time.Millisecond)
	// Cut once r2 applies the churn's changes: from then on it has some
	// in flight at any moment.
	select {
	case <-f.firstWriteBy(t, "r2", before.rev):
	case <-time.After(within):
		t.Fatal("r2 applied none of the churned sizes")
	}
	oldTokens := map[string]bool{}
	for slot, owner := range before.claims {
		if owner == "r2" {
			oldTokens[fmt.Sprintf("r2@%d", before.tokens[slot])] = true
		}
	}

	dropped := make(chan time.Time, 1)
	go func() {
		f.replicas["r2"].WaitLine("owned 0", within)
		dropped <- time.Now()
	}()
	takenOver, writes := f.watchTakeover(t, before)

	f.nodes["r2"].Cut(f.etcd[0].IP)
	took := f.waitMoved(t, []string{"r1", "r3"}, e2eTTL+2*time.Second)
	t.Logf("r2 cut off: the others own its slots and reconciled its keys after %v (TTL %v)", took, e2eTTL)
	var stoppedAt, takenAt time.Time
	select {
	case stoppedAt = <-dropped:
	case <-time.After(within):
		t.Fatal("r2 never reported dropping its slots")
	}
	select {
	case takenAt = <-takenOver:
	case <-time.After(within):
		t.Fatal("no claim of r2's slots by another replica seen")
	}
	if !stoppedAt.Before(takenAt) {
		t.Fatalf("r2 stopped at %v, after another replica took one of its slots at %v", stoppedAt, takenAt)
	}

	f.nodes["r2"].Restore()
	stopChurn()
	f.waitSettled(t, all, 30*time.Second)
	// The writes r2 sent during the cut arrive now; once one was refused,
	// look at every write the target accepted.
	f.waitStale(t)
	seen := writes()
	if seen.expiryRev == 0 {
		t.Fatal("r2's claims were never deleted")
	}
	for _, w := range seen.writes {
		if oldTokens[w.value] && w.rev > seen.expiryRev {
			t.Fatalf("the target accepted a write under r2's old token %s at revision %d, after its claims expired at %d",
				w.value, w.rev, seen.expiryRev)
		}
	}
	s := f.read(t)
	if len(s.overlaps) > 0 {
		t.Fatalf("overlapping operations recorded at the target: %v", s.overlaps)
	}
	t.Logf("stale writes refused by the target: %d", s.stale)
}

// waitStale waits until the target has refused at least one write.
func (f *fleet) waitStale(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	wch := f.cli.Watch(ctx, "/fleet/stale/", clientv3.WithPrefix())
	for f.read(t).stale == 0 {
		select {
		case <-wch:
		case <-ctx.Done():
			t.Fatal("the target refused no write of r2's: the cut left nothing in flight, so the test proved nothing")
		}
	}
}

// targetWrite is one accepted write at the target.
type targetWrite struct {
	value string
	rev   int64
}

// takeover is what watchTakeover saw.
type takeover struct {
	writes    []targetWrite
	expiryRev int64 // revision at which r2's claims were deleted (its lease expired)
}

// watchTakeover watches, from before's revision on, for the first claim of
// one of r2's slots by another replica (sent on the channel), the deletion
// of r2's claims, and every accepted target write; result returns them.
func (f *fleet) watchTakeover(t testing.TB, before state) (<-chan time.Time, func() takeover) {
	ctx, cancel := context.WithCancel(context.Background())
	wch := f.cli.Watch(ctx, "/fleet/", clientv3.WithPrefix(), clientv3.WithRev(before.rev+1))
	taken := make(chan time.Time, 1)
	var got takeover
	done := make(chan struct{})
	go func() {
		defer close(done)
		for wr := range wch {
			for _, ev := range wr.Events {
				f.sawEvent(before, ev, taken, &got)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return taken, func() takeover { cancel(); <-done; return got }
}

func (f *fleet) sawEvent(before state, ev *clientv3.Event, taken chan time.Time, got *takeover) {
	k, v := string(ev.Kv.Key), string(ev.Kv.Value)
	if rest, ok := strings.CutPrefix(k, "/fleet/shards/slots/"); ok {
		slot, _ := strconv.Atoi(rest)
		if before.claims[slot] != "r2" {
			return
		}
		if ev.Type == clientv3.EventTypeDelete && got.expiryRev == 0 {
			got.expiryRev = ev.Kv.ModRevision
		}
		if ev.Type == clientv3.EventTypePut && v != "r2" {
			select {
			case taken <- time.Now():
			default:
			}
		}
		return
	}
	if ev.Type == clientv3.EventTypePut && strings.HasPrefix(k, "/fleet/target/") {
		claim, _ := splitWrite(v)
		got.writes = append(got.writes, targetWrite{value: claim, rev: ev.Kv.ModRevision})
	}
}

// Row 2 of the fault table: a replica stopped cleanly, and one added. The
// slots move within 2 s each time, and no two operations on one key ever
// overlap: the desired sizes churn so that every replica keeps operations
// in flight, and the handover waits for them.
func TestE2EReplicaStoppedAndAdded(t *testing.T) {
	flags := []string{"-call-time", "50ms"}
	f := startFleet(t, 1)
	for _, name := range []string{"r1", "r2", "r3"} {
		f.start(t, name, flags...)
	}
	f.waitSettled(t, []string{"r1", "r2", "r3"}, 60*time.Second)
	stopChurn := f.churn(t, 10*time.Millisecond)

	start := time.Now()
	f.replicas["r2"].Stop()
	f.waitMoved(t, []string{"r1", "r3"}, 2*time.Second-time.Since(start))
	t.Logf("r2 stopped cleanly: slots moved and groups applied by their new owners after %v", time.Since(start))

	start = time.Now()
	f.start(t, "r4", flags...)
	f.waitMoved(t, []string{"r1", "r3", "r4"}, 2*time.Second-time.Since(start))
	t.Logf("r4 added: slots moved and groups applied by their new owners after %v (process start included)", time.Since(start))
	stopChurn()
	f.waitSettled(t, []string{"r1", "r3", "r4"}, within)
	if s := f.read(t); len(s.overlaps) > 0 {
		t.Fatalf("overlapping operations recorded at the target: %v", s.overlaps)
	}
}
