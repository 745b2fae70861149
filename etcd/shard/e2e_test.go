package shard

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/converge-go/converge/etcd/internal/netlab"
)

// The multi-process tests: an etcd server process in one network
// namespace, replica processes (internal/testreplica) in one namespace
// each, and the test's client in another. The target is etcd itself.

const (
	e2eTTL   = 3 * time.Second
	e2eKeys  = 64
	e2eSlots = 32
)

type fleet struct {
	lab       *netlab.Lab
	etcd      []*netlab.Node
	etcdProcs []*netlab.Proc
	cli       *clientv3.Client
	endpoints []string
	bin       string
	replicas  map[string]*netlab.Proc
	nodes     map[string]*netlab.Node
	client    *netlab.Node
}

// startFleet starts an etcd cluster of members processes, one namespace
// each, the test's client, and replicas names.
func startFleet(t testing.TB, members int, names ...string) *fleet {
	t.Helper()
	lab := netlab.New(t)
	f := &fleet{lab: lab, replicas: map[string]*netlab.Proc{}, nodes: map[string]*netlab.Node{}}
	server := netlab.Build(t, "github.com/converge-go/converge/etcd/internal/etcdcluster/etcdserver")
	f.bin = netlab.Build(t, "github.com/converge-go/converge/etcd/internal/testreplica")
	var initial []string
	for i := range members {
		n := lab.Node(fmt.Sprintf("etcd%d", i))
		f.etcd = append(f.etcd, n)
		f.endpoints = append(f.endpoints, "http://"+n.IP+":2379")
		initial = append(initial, fmt.Sprintf("m%d=http://%s:2380", i, n.IP))
	}
	for i, n := range f.etcd {
		p := n.Start(t, n.Name, server, "-name", fmt.Sprintf("m%d", i), "-data-dir", t.TempDir(),
			"-client-url", f.endpoints[i], "-peer-url", "http://"+n.IP+":2380",
			"-initial-cluster", strings.Join(initial, ","))
		f.etcdProcs = append(f.etcdProcs, p)
	}
	for _, p := range f.etcdProcs {
		p.WaitLine("ready", 30*time.Second)
	}

	client := lab.Node("client")
	f.client = client
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: f.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return client.DialContext(ctx, addr)
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	f.cli = cli
	for _, name := range names {
		f.start(t, name)
	}
	return f
}

func (f *fleet) start(t testing.TB, name string, extra ...string) {
	t.Helper()
	n, ok := f.nodes[name]
	if !ok {
		n = f.lab.Node(name)
		f.nodes[name] = n
	}
	args := []string{"-endpoints", strings.Join(f.endpoints, ","), "-name", name,
		"-keys", strconv.Itoa(e2eKeys), "-slots", strconv.Itoa(e2eSlots), "-ttl", e2eTTL.String()}
	f.replicas[name] = n.Start(t, name, f.bin, append(args, extra...)...)
}

// splitWrite splits a target value "<replica>@<revision>@<unix ns>" into
// the claim it was written under and when it was written.
func splitWrite(v string) (claim string, at time.Time) {
	i := strings.LastIndexByte(v, '@')
	if i < 0 {
		return v, time.Time{}
	}
	ns, _ := strconv.ParseInt(v[i+1:], 10, 64)
	return v[:i], time.Unix(0, ns)
}

// state is what etcd says about the fleet at one revision.
type state struct {
	rev      int64
	claims   map[int]string // slot -> replica
	tokens   map[int]int64  // slot -> its claim's create revision
	target   map[string]string
	overlaps []string
	stale    int
}

func (f *fleet) read(t testing.TB) state {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	resp, err := f.cli.Get(ctx, "/fleet/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	s := state{rev: resp.Header.Revision, claims: map[int]string{}, tokens: map[int]int64{}, target: map[string]string{}}
	for _, kv := range resp.Kvs {
		k, v := string(kv.Key), string(kv.Value)
		switch {
		case strings.HasPrefix(k, "/fleet/shards/slots/"):
			slot, _ := strconv.Atoi(strings.TrimPrefix(k, "/fleet/shards/slots/"))
			s.claims[slot] = v
			s.tokens[slot] = kv.CreateRevision
		case strings.HasPrefix(k, "/fleet/target/"):
			s.target[strings.TrimPrefix(k, "/fleet/target/")], _ = splitWrite(v)
		case strings.HasPrefix(k, "/fleet/overlap/"):
			s.overlaps = append(s.overlaps, k)
		case strings.HasPrefix(k, "/fleet/stale/"):
			s.stale++
		}
	}
	return s
}

// settled reports what is still wrong for: every slot claimed by one of
// live, as rendezvous hashing over live assigns it, and every key written
// by its slot's owner under the slot's current claim.
func (s state) settled(live []string) string {
	for slot := range e2eSlots {
		if want := Assign(slot, live); s.claims[slot] != want {
			return fmt.Sprintf("slot %d claimed by %q, assigned to %q", slot, s.claims[slot], want)
		}
	}
	for i := range e2eKeys {
		key := "group-" + strconv.Itoa(i)
		slot := SlotOf([]byte(key), e2eSlots)
		if want := fmt.Sprintf("%s@%d", s.claims[slot], s.tokens[slot]); s.target[key] != want {
			return fmt.Sprintf("%s last written as %q, want %q", key, s.target[key], want)
		}
	}
	return ""
}

// waitSettled watches the fleet's keys until settled(live) holds, and
// returns the time it took.
func (f *fleet) waitSettled(t testing.TB, live []string, bound time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	wch := f.cli.Watch(ctx, "/fleet/", clientv3.WithPrefix())
	for {
		s := f.read(t)
		msg := s.settled(live)
		if msg == "" {
			return time.Since(start)
		}
		select {
		case <-wch:
		case <-ctx.Done():
			t.Fatalf("not settled within %v: %s", bound, msg)
		}
	}
}

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
// r2 keeps operations in flight all the time (-refresh), and its writes
// ignore cancellation (-ignore-cancel), as a paused process's would: the
// writes it sent during the cut arrive after it, under old tokens, and the
// target must refuse every one (the test expects at least one and counts
// them).
func TestE2EReplicaCutOff(t *testing.T) {
	f := startFleet(t, 1, "r1", "r3")
	f.start(t, "r2", "-refresh", "100ms", "-op", "300ms", "-ignore-cancel")
	all := []string{"r1", "r2", "r3"}
	f.waitSettled(t, all, 60*time.Second)
	before := f.read(t)
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
	took := f.waitSettled(t, []string{"r1", "r3"}, e2eTTL+2*time.Second)
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
// overlap: every replica keeps operations in flight (-refresh), and the
// handover waits for them.
func TestE2EReplicaStoppedAndAdded(t *testing.T) {
	flags := []string{"-refresh", "100ms", "-op", "50ms"}
	f := startFleet(t, 1)
	for _, name := range []string{"r1", "r2", "r3"} {
		f.start(t, name, flags...)
	}
	f.waitSettled(t, []string{"r1", "r2", "r3"}, 60*time.Second)

	start := time.Now()
	f.replicas["r2"].Stop()
	f.waitSettled(t, []string{"r1", "r3"}, 2*time.Second-time.Since(start))
	t.Logf("r2 stopped cleanly: slots moved and keys reconciled after %v", time.Since(start))

	start = time.Now()
	f.start(t, "r4", flags...)
	f.waitSettled(t, []string{"r1", "r3", "r4"}, 2*time.Second-time.Since(start))
	t.Logf("r4 added: slots moved and keys reconciled after %v (process start included)", time.Since(start))
	if s := f.read(t); len(s.overlaps) > 0 {
		t.Fatalf("overlapping operations recorded at the target: %v", s.overlaps)
	}
}
