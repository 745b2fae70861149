package shard

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/converge-go/converge/etcd/internal/netlab"
)

// The multi-process tests: an etcd server process in one network
// namespace, replicas of the fleet controller (etcd/example/fleet: the
// etcd source, the reconciler with this package's Manager as its
// Ownership, a fenced target in etcd) in one namespace each, and the
// test's client in another. The test writes the desired groups at
// /fleet/desired/group-<i> and reads what the replicas applied at
// /fleet/target/group-<i>.

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

	mu  sync.Mutex
	gen int // the last size written to a desired group
}

// startFleet starts an etcd cluster of members processes, one namespace
// each, the test's client, writes the desired groups, and starts replicas
// names.
func startFleet(t testing.TB, members int, names ...string) *fleet {
	t.Helper()
	lab := netlab.New(t)
	f := &fleet{lab: lab, replicas: map[string]*netlab.Proc{}, nodes: map[string]*netlab.Node{}}
	server := netlab.Build(t, "github.com/converge-go/converge/etcd/internal/etcdcluster/etcdserver")
	f.bin = netlab.Build(t, "github.com/converge-go/converge/etcd/example/fleet")
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
	f.bumpAll(t)
	for _, name := range names {
		f.start(t, name)
	}
	return f
}

// start starts the replica name (again), with the harness's flags and
// extra ones.
func (f *fleet) start(t testing.TB, name string, extra ...string) {
	t.Helper()
	n, ok := f.nodes[name]
	if !ok {
		n = f.lab.Node(name)
		f.nodes[name] = n
	}
	args := []string{"-endpoints", strings.Join(f.endpoints, ","), "-name", name,
		"-slots", strconv.Itoa(e2eSlots), "-ttl", e2eTTL.String(), "-summary-interval", "500ms"}
	f.replicas[name] = n.Start(t, name, f.bin, append(args, extra...)...)
}

func groupKey(i int) string { return "group-" + strconv.Itoa(i) }

// bumpAll gives every desired group a new size, in one transaction.
func (f *fleet) bumpAll(t testing.TB) {
	t.Helper()
	ops := make([]clientv3.Op, e2eKeys)
	for i := range e2eKeys {
		ops[i] = f.bumpOp(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if _, err := f.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatal(err)
	}
}

func (f *fleet) bumpOp(i int) clientv3.Op {
	f.mu.Lock()
	f.gen++
	size := f.gen
	f.mu.Unlock()
	return clientv3.OpPut("/fleet/desired/"+groupKey(i), fmt.Sprintf(`{"size":%d}`, size))
}

// churn gives one desired group after the other a new size, every
// interval, until the returned function is called: the replicas keep
// operations in flight. Sizes only grow, so that a write applied out of
// order shows.
func (f *fleet) churn(t testing.TB, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(every)
		defer ticker.Stop()
		for i := 0; ; i = (i + 1) % e2eKeys {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			// Failures (an etcd fault) are the point of some tests: the
			// next tick tries again. A put sent to a member as it dies
			// can go unanswered: give up on it after a second.
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			_, _ = f.cli.Do(pctx, f.bumpOp(i))
			pcancel()
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// applied is what a replica wrote at /fleet/target/<group>
// (the fleet example's Applied).
type applied struct {
	Size    int    `json:"size"`
	Replica string `json:"replica"`
	Token   int64  `json:"token"`
	At      int64  `json:"at"`
}

func parseApplied(v []byte) applied {
	var a applied
	_ = json.Unmarshal(v, &a)
	return a
}

// splitWrite splits a target value into the claim it was written under,
// "<replica>@<token revision>", and when it was written.
func splitWrite(v string) (claim string, at time.Time) {
	a := parseApplied([]byte(v))
	return fmt.Sprintf("%s@%d", a.Replica, a.Token), time.Unix(0, a.At)
}

// state is what etcd says about the fleet at one revision.
type state struct {
	rev      int64
	claims   map[int]string    // slot -> replica
	tokens   map[int]int64     // slot -> its claim's create revision
	target   map[string]string // group -> "<replica>@<token>" it was last applied under
	sizes    map[string]int    // group -> size applied
	desired  map[string]int    // group -> size desired
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
	s := state{rev: resp.Header.Revision, claims: map[int]string{}, tokens: map[int]int64{},
		target: map[string]string{}, sizes: map[string]int{}, desired: map[string]int{}}
	for _, kv := range resp.Kvs {
		k, v := string(kv.Key), string(kv.Value)
		switch {
		case strings.HasPrefix(k, "/fleet/shards/slots/"):
			slot, _ := strconv.Atoi(strings.TrimPrefix(k, "/fleet/shards/slots/"))
			s.claims[slot] = v
			s.tokens[slot] = kv.CreateRevision
		case strings.HasPrefix(k, "/fleet/desired/"):
			s.desired[strings.TrimPrefix(k, "/fleet/desired/")] = parseApplied(kv.Value).Size
		case strings.HasPrefix(k, "/fleet/target/"):
			name := strings.TrimPrefix(k, "/fleet/target/")
			s.target[name], _ = splitWrite(v)
			s.sizes[name] = parseApplied(kv.Value).Size
		case strings.HasPrefix(k, "/fleet/overlap/"):
			s.overlaps = append(s.overlaps, k+": "+v)
		case strings.HasPrefix(k, "/fleet/stale/"):
			s.stale++
		}
	}
	return s
}

// settled reports what is still wrong for: every slot claimed by one of
// live, as rendezvous hashing over live assigns it, and every group
// applied by its slot's owner under the slot's current claim. exact also
// asks that every group's applied size be the desired one (not while the
// desired sizes churn).
func (s state) settled(live []string, exact bool) string {
	for slot := range e2eSlots {
		if want := Assign(slot, live); s.claims[slot] != want {
			return fmt.Sprintf("slot %d claimed by %q, assigned to %q", slot, s.claims[slot], want)
		}
	}
	for i := range e2eKeys {
		key := groupKey(i)
		slot := SlotOf([]byte(key), e2eSlots)
		if want := fmt.Sprintf("%s@%d", s.claims[slot], s.tokens[slot]); s.target[key] != want {
			return fmt.Sprintf("%s last applied under %q, want %q", key, s.target[key], want)
		}
		if exact && s.sizes[key] != s.desired[key] {
			return fmt.Sprintf("%s applied at size %d, desired %d", key, s.sizes[key], s.desired[key])
		}
	}
	if len(s.target) != e2eKeys {
		return fmt.Sprintf("%d groups applied, want %d", len(s.target), e2eKeys)
	}
	return ""
}

// waitSettled watches the fleet's keys until settled(live, true) holds,
// and returns the time it took.
func (f *fleet) waitSettled(t testing.TB, live []string, bound time.Duration) time.Duration {
	t.Helper()
	return f.waitFor(t, bound, func(s state) string { return s.settled(live, true) })
}

// waitMoved is waitSettled while the desired sizes churn: the slots are
// where they belong and every group was applied by its current owner.
func (f *fleet) waitMoved(t testing.TB, live []string, bound time.Duration) time.Duration {
	t.Helper()
	return f.waitFor(t, bound, func(s state) string { return s.settled(live, false) })
}

func (f *fleet) waitFor(t testing.TB, bound time.Duration, wrong func(state) string) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	wch := f.cli.Watch(ctx, "/fleet/", clientv3.WithPrefix())
	for {
		msg := wrong(f.read(t))
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
