package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/converge-go/converge/etcd/internal/netlab"
	"github.com/converge-go/converge/etcd/shard"
)

// within bounds every wait of the end-to-end test; it never paces one.
const within = 60 * time.Second

// e2e is the example as an operator runs it: an etcd server in one
// network namespace, three replicas of the fleet controller in one each,
// and the test (the operator) in another.
type e2e struct {
	t        *testing.T
	bin      string
	endpoint string
	client   *netlab.Node
	cli      *clientv3.Client
	http     *http.Client
	replicas map[string]*netlab.Node
	procs    map[string]*netlab.Proc
}

func startE2E(t *testing.T, extra ...string) *e2e {
	lab := netlab.New(t) // fails under CI=true where it cannot run
	server := netlab.Build(t, "github.com/converge-go/converge/etcd/internal/etcdcluster/etcdserver")
	e := &e2e{t: t, bin: netlab.Build(t, "github.com/converge-go/converge/etcd/example/fleet"), replicas: map[string]*netlab.Node{}, procs: map[string]*netlab.Proc{}}
	etcd := lab.Node("etcd")
	e.endpoint = "http://" + etcd.IP + ":2379"
	etcd.Start(t, "etcd", server, "-name", "m0", "-data-dir", t.TempDir(),
		"-client-url", e.endpoint, "-peer-url", "http://"+etcd.IP+":2380").WaitLine("ready", 30*time.Second)
	e.client = lab.Node("client")
	dial := func(ctx context.Context, addr string) (net.Conn, error) { return e.client.DialContext(ctx, addr) }
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: []string{e.endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(dial)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	e.cli = cli
	tr := &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return dial(ctx, addr) }}
	t.Cleanup(tr.CloseIdleConnections)
	e.http = &http.Client{Transport: tr, Timeout: 10 * time.Second}

	// A group the fleet runs and nobody desires: the owner of its slot
	// must remove it (Prune).
	e.put("/fleet/target/stray", `{"size":1,"replica":"nobody"}`)
	for i := range 20 {
		e.put(fmt.Sprintf("/fleet/desired/web-%d", i), fmt.Sprintf(`{"size":%d,"image":"web:1"}`, i+1))
	}
	for _, name := range []string{"r1", "r2", "r3"} {
		n := lab.Node(name)
		e.replicas[name] = n
		args := []string{"-endpoints", e.endpoint, "-name", name, "-slots", "16", "-ttl", "2s",
			"-http", ":8080", "-summary-interval", "200ms"}
		e.procs[name] = n.Start(t, name, e.bin, append(args, extra...)...)
	}
	return e
}

func (e *e2e) put(key, value string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if _, err := e.cli.Put(ctx, key, value); err != nil {
		e.t.Fatal(err)
	}
}

// fleetMatches reports what is still wrong for: every desired group
// applied at its spec, and nothing else in the fleet.
func (e *e2e) fleetMatches(ctx context.Context) string {
	return e.fleetMatchesAt(ctx, 0)
}

// fleetMatchesAt is fleetMatches as of etcd revision rev (0: now).
func (e *e2e) fleetMatchesAt(ctx context.Context, rev int64) string {
	resp, err := e.cli.Get(ctx, "/fleet/", clientv3.WithPrefix(), clientv3.WithRev(rev))
	if err != nil {
		return err.Error()
	}
	desired, applied := map[string]Spec{}, map[string]Applied{}
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		if name, ok := strings.CutPrefix(k, "/fleet/desired/"); ok {
			var s Spec
			_ = json.Unmarshal(kv.Value, &s)
			desired[name] = s
		}
		if name, ok := strings.CutPrefix(k, "/fleet/target/"); ok {
			var a Applied
			_ = json.Unmarshal(kv.Value, &a)
			applied[name] = a
		}
		if strings.HasPrefix(k, "/fleet/overlap/") {
			e.t.Errorf("overlapping operations: %s: %s", k, kv.Value)
		}
	}
	for name, s := range desired {
		if applied[name].Spec != s {
			return fmt.Sprintf("%s applied as %+v, desired %+v", name, applied[name].Spec, s)
		}
	}
	for name := range applied {
		if _, ok := desired[name]; !ok {
			return fmt.Sprintf("%s applied and not desired", name)
		}
	}
	return ""
}

// viewDone asks replica's GET /view whether the whole desired set is Done,
// with want groups Done by replicas replicas (sharded) or by the leader
// (leader-only: the view is a group of one slot, the leader's).
func (e *e2e) viewDone(ctx context.Context, replica string, replicas, want int) string {
	url := "http://" + e.replicas[replica].IP + ":8080/view"
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := e.http.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("GET %s: %s: %s", url, resp.Status, body)
	}
	var v shard.View
	if json.Unmarshal(body, &v) != nil {
		return fmt.Sprintf("GET %s: %s", url, body)
	}
	if len(v.Replicas) == replicas && v.Objects.Done == want {
		return ""
	}
	return fmt.Sprintf("GET %s: not yet %d replicas and %d groups done: %s", url, replicas, want, body)
}

// waitDone waits, re-checking whenever a key of the fleet changes (the
// view is made of keys of the fleet), until the fleet matches the desired
// groups and replica's view says Done (see viewDone).
func (e *e2e) waitDone(replica string, replicas, want int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	wch := e.cli.Watch(ctx, "/fleet/", clientv3.WithPrefix())
	for {
		msg := e.fleetMatches(ctx)
		if msg == "" {
			msg = e.viewDone(ctx, replica, replicas, want)
		}
		if msg == "" {
			return
		}
		select {
		case <-wch:
		case <-ctx.Done():
			e.logFleet()
			e.t.Fatalf("the fleet is not done within %v: %s", within, msg)
		}
	}
}

// logFleet logs what the fleet holds besides the desired groups (applied
// groups, marks, overlaps, refused writes, claims), with the revisions and
// leases that tell who wrote what when: the evidence of a failed wait.
func (e *e2e) logFleet() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := e.cli.Get(ctx, "/fleet/", clientv3.WithPrefix())
	if err != nil {
		e.t.Logf("the fleet cannot be read: %v", err)
		return
	}
	e.t.Logf("the fleet at revision %d:", resp.Header.Revision)
	for _, kv := range resp.Kvs {
		if !strings.HasPrefix(string(kv.Key), "/fleet/desired/") {
			e.t.Logf("  %s = %s (created %d, modified %d, lease %x)", kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision, kv.Lease)
		}
	}
}

// view runs "fleet view" as an operator would, from the client's
// namespace, and returns its output and exit code.
func (e *e2e) view(extra ...string) (string, int) {
	e.t.Helper()
	out, err := e.client.Command(e.bin, append([]string{"view", "-endpoints", e.endpoint}, extra...)...).CombinedOutput()
	if exit, ok := err.(interface{ ExitCode() int }); ok {
		return string(out), exit.ExitCode()
	}
	if err != nil {
		e.t.Fatalf("fleet view: %v: %s", err, out)
	}
	return string(out), 0
}

// Three sharded replicas apply twenty desired groups and remove a stray
// one; the view (HTTP and command) says Done; a resize and a delete reach
// the fleet; the view says Done again, with every slot claimed.
func TestE2EThreeReplicas(t *testing.T) {
	e := startE2E(t)
	e.waitDone("r1", 3, 20)
	out, code := e.view()
	if code != 0 || !strings.Contains(out, "done:    true") {
		t.Fatalf("fleet view exited %d:\n%s", code, out)
	}
	t.Logf("fleet view:\n%s", out)

	e.put("/fleet/desired/web-4", `{"size":40,"image":"web:2"}`)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if _, err := e.cli.Delete(ctx, "/fleet/desired/web-3"); err != nil {
		t.Fatal(err)
	}
	e.waitDone("r2", 3, 19)
	out, code = e.view("-json")
	var v shard.View
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil {
		t.Fatalf("fleet view -json exited %d (%v):\n%s", code, err, out)
	}
	if v.Claimed != 16 || len(v.Replicas) != 3 || v.Objects.Done != 19 {
		t.Fatalf("view: %d slots claimed, %d replicas, %d groups done; want 16, 3, 19", v.Claimed, len(v.Replicas), v.Objects.Done)
	}
}

// The same, leader-only: one replica applies everything, the others stand
// by; the view names the leader.
func TestE2EThreeReplicasLeaderOnly(t *testing.T) {
	e := startE2E(t, "-leader-only")
	e.waitDone("r3", 1, 20)
	out, code := e.view("-leader-only")
	if code != 0 || !strings.Contains(out, "done:    true") {
		t.Fatalf("fleet view -leader-only exited %d:\n%s", code, out)
	}
	t.Logf("fleet view -leader-only:\n%s", out)
}
