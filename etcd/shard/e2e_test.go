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
	lab      *netlab.Lab
	etcd     *netlab.Node
	cli      *clientv3.Client
	endpoint string
	bin      string
	replicas map[string]*netlab.Proc
	nodes    map[string]*netlab.Node
}

func startFleet(t *testing.T, names ...string) *fleet {
	t.Helper()
	lab := netlab.New(t)
	f := &fleet{lab: lab, etcd: lab.Node("etcd"), replicas: map[string]*netlab.Proc{}, nodes: map[string]*netlab.Node{}}
	server := netlab.Build(t, "github.com/converge-go/converge/etcd/internal/etcdcluster/etcdserver")
	f.bin = netlab.Build(t, "github.com/converge-go/converge/etcd/internal/testreplica")
	f.endpoint = "http://" + f.etcd.IP + ":2379"
	p := f.etcd.Start(t, "etcd", server, "-data-dir", t.TempDir(),
		"-client-url", f.endpoint, "-peer-url", "http://"+f.etcd.IP+":2380")
	p.WaitLine("ready", 30*time.Second)

	client := lab.Node("client")
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{f.endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
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

func (f *fleet) start(t *testing.T, name string) {
	t.Helper()
	n, ok := f.nodes[name]
	if !ok {
		n = f.lab.Node(name)
		f.nodes[name] = n
	}
	f.replicas[name] = n.Start(t, name, f.bin, "-endpoints", f.endpoint, "-name", name,
		"-keys", strconv.Itoa(e2eKeys), "-slots", strconv.Itoa(e2eSlots), "-ttl", e2eTTL.String())
}

// state is what etcd says about the fleet at one revision.
type state struct {
	rev      int64
	claims   map[int]string // slot -> replica
	target   map[string]string
	overlaps []string
	stale    int
}

func (f *fleet) read(t *testing.T) state {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	resp, err := f.cli.Get(ctx, "/fleet/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	s := state{rev: resp.Header.Revision, claims: map[int]string{}, target: map[string]string{}}
	for _, kv := range resp.Kvs {
		k, v := string(kv.Key), string(kv.Value)
		switch {
		case strings.HasPrefix(k, "/fleet/shards/slots/"):
			slot, _ := strconv.Atoi(strings.TrimPrefix(k, "/fleet/shards/slots/"))
			s.claims[slot] = v
		case strings.HasPrefix(k, "/fleet/target/"):
			s.target[strings.TrimPrefix(k, "/fleet/target/")] = v
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
// by its slot's owner.
func (s state) settled(live []string) string {
	for slot := range e2eSlots {
		if want := Assign(slot, live); s.claims[slot] != want {
			return fmt.Sprintf("slot %d claimed by %q, assigned to %q", slot, s.claims[slot], want)
		}
	}
	for i := range e2eKeys {
		key := "group-" + strconv.Itoa(i)
		owner := s.claims[SlotOf([]byte(key), e2eSlots)]
		if by, _, _ := strings.Cut(s.target[key], "@"); by != owner {
			return fmt.Sprintf("%s last written by %q, owned by %q", key, s.target[key], owner)
		}
	}
	return ""
}

// waitSettled watches the fleet's keys until settled(live) holds, and
// returns the time it took.
func (f *fleet) waitSettled(t *testing.T, live []string, bound time.Duration) time.Duration {
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
	f := startFleet(t, "r1", "r2", "r3")
	f.waitSettled(t, []string{"r1", "r2", "r3"}, 60*time.Second)

	f.replicas["r2"].Kill()
	took := f.waitSettled(t, []string{"r1", "r3"}, e2eTTL+2*time.Second)
	t.Logf("r2 SIGKILLed: its slots owned again and its keys reconciled after %v (TTL %v)", took, e2eTTL)
	if s := f.read(t); len(s.overlaps) > 0 {
		t.Fatalf("overlapping operations recorded at the target: %v", s.overlaps)
	}
}
