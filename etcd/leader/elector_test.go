package leader

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/fencing"
	"github.com/converge-go/converge/etcd/internal/etcdcluster"
	"github.com/converge-go/converge/etcd/internal/lease"
)

// A clean stop drains, then resigns: the stopping leader starts nothing
// new, its operation in flight keeps its context until it ends, the standby
// does not lead before that, and then leads long before the old leader's
// lease (10 s) could have expired; the old term's token is refused from
// then on.
func TestCleanStopDrainsThenHandsOverBeforeTTL(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	cli := c.Client(t)
	a, stopA := startElector(t, cli, "a", 10*time.Second)
	b, stopB := startElector(t, cli, "b", 10*time.Second)
	first := waitOneLeader(t, a, b)
	second, stopFirst := b, stopA
	if first == b {
		second, stopFirst = a, stopB
	}
	tok, _ := first.Token()
	opCtx, release, ok := first.Acquire(context.Background(), []byte("k"))
	if !ok {
		t.Fatal("leader could not Acquire")
	}

	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		stopFirst()
	}()
	waitFor(t, first, func() bool { return !first.Owns(nil) })
	if _, _, ok := first.Acquire(context.Background(), nil); ok {
		t.Fatal("a stopping leader started an operation")
	}
	if opCtx.Err() != nil {
		t.Fatalf("in-flight operation cancelled during a clean stop's drain: %v", context.Cause(opCtx))
	}
	if second.Leading() {
		t.Fatal("standby leads while the old leader's operation is in flight")
	}
	release()
	<-stopped
	// Bounded by half the TTL: a takeover by lease expiry could not
	// happen that early.
	ch := second.Changed()
	if !second.Leading() {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("standby not leading 5s after a clean stop (TTL 10s)")
		}
	}
	if !second.Leading() || first.Leading() {
		t.Fatalf("after the handover: first leading %v, second leading %v", first.Leading(), second.Leading())
	}
	err := fencing.Do(fencing.WithToken(context.Background(), tok), cli, clientv3.OpPut("/target/x", "old"))
	if !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("write with the resigned term's token: %v, want ErrStale", err)
	}
	tok2, _ := second.Token()
	if tok2.Revision <= tok.Revision {
		t.Fatalf("new term's revision %d not above the old one's %d", tok2.Revision, tok.Revision)
	}
}

// An operation that does not end within ResignTimeout of a clean stop is
// cancelled with ErrStopped.
func TestCleanStopCancelsAfterResignTimeout(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	a, stop := startElector(t, c.Client(t), "a", 2*time.Second, func(cfg *Config) { cfg.ResignTimeout = 200 * time.Millisecond })
	waitLeading(t, a, true)
	opCtx, release, _ := a.Acquire(context.Background(), nil)
	defer release()
	stop()
	if err := context.Cause(opCtx); !errors.Is(err, ErrStopped) {
		t.Fatalf("hung operation after a clean stop: %v, want ErrStopped", err)
	}
}

// A leader cut off from etcd steps down before its lease can expire; the
// standby leads only after expiry; the old leader's fenced write, sent once
// the link is back, is refused; and the old leader campaigns again.
func TestPartitionedLeaderStepsDownBeforeExpiry(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	proxy := etcdcluster.NewProxy(t, c.Endpoints()[0])
	cutCli := etcdcluster.NewClient(t, proxy.Endpoint())
	a, _ := startElector(t, cutCli, "a", 2*time.Second)
	waitLeading(t, a, true)
	ra := &recorder{}
	a.Govern(ra)
	if !ra.isRunning() {
		t.Fatal("Govern while leading did not resume")
	}
	b, _ := startElector(t, c.Client(t), "b", 2*time.Second)

	tok, _ := a.Token()
	opCtx, release, ok := a.Acquire(context.Background(), nil)
	if !ok {
		t.Fatal("leader could not Acquire")
	}

	proxy.Cut()
	waitLeading(t, a, false)
	if ra.isRunning() {
		t.Fatal("governed reconciler still running after the term ended")
	}
	if err := context.Cause(opCtx); !errors.Is(err, ErrLeaseInDoubt) {
		t.Fatalf("in-flight op after partition: cause %v, want ErrLeaseInDoubt", err)
	}
	release() // the cancelled operation ends
	if _, _, ok := a.Acquire(context.Background(), nil); ok {
		t.Fatal("Acquire succeeded after the term ended")
	}
	// The standby still sees a's key: a stepped down before expiry.
	resp, err := c.Client(t).Get(context.Background(), tok.Key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 {
		t.Fatalf("a's election key already gone when a stepped down: lease expired before a noticed")
	}
	waitLeading(t, b, true)

	proxy.Restore()
	// The old leader's write, made under its old token after the link is
	// back, is refused at the target.
	err = fencing.Do(fencing.WithToken(context.Background(), tok), cutCli, clientv3.OpPut("/target/x", "a"))
	if !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("stale leader's write: %v, want ErrStale", err)
	}
	// The new leader's write is accepted.
	btok, _ := b.Token()
	if err := fencing.Do(fencing.WithToken(context.Background(), btok), cutCli, clientv3.OpPut("/target/x", "b")); err != nil {
		t.Fatalf("new leader's write: %v", err)
	}
	if a.Leading() {
		t.Fatal("two leaders")
	}
}

// etcd #19597: Campaign can return after the session's lease expired. The
// elector's check after Campaign refuses such a win.
func TestVerifyRefusesCampaignWonWithExpiredLease(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	cli := c.Client(t)
	e, err := New(Config{Client: cli, Prefix: "/test/19597", Name: "a", TTL: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := lease.Start(ctx, cli, e.cfg.TTL, e.cfg.SafetyMargin)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	tok, err := e.campaign(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.verify(ctx, s, tok); err != nil {
		t.Fatalf("verify of a live win: %v", err)
	}
	// The lease expires (revoked here, as the server does at expiry)
	// between Campaign's wait and our check.
	if _, err := cli.Revoke(ctx, s.Lease()); err != nil {
		t.Fatal(err)
	}
	if err := e.verify(ctx, s, tok); !errors.Is(err, ErrCampaignStale) && !errors.Is(err, ErrLeaseInDoubt) {
		t.Fatalf("verify after the lease was revoked: %v, want ErrCampaignStale", err)
	}
}

// A lease revoked under a running leader (as at expiry) ends its term, and
// the elector campaigns again with a new session and leads with a newer
// token.
func TestRevokedLeaseEndsTermAndCampaignsAgain(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	cli := c.Client(t)
	a, _ := startElector(t, cli, "a", 10*time.Second)
	waitLeading(t, a, true)
	tok, _ := a.Token()
	opCtx, release, _ := a.Acquire(context.Background(), nil)
	if _, err := cli.Revoke(context.Background(), tok.Lease); err != nil {
		t.Fatal(err)
	}
	select {
	case <-opCtx.Done():
	case <-time.After(within):
		t.Fatal("term did not end after its lease was revoked")
	}
	if err := context.Cause(opCtx); !errors.Is(err, ErrLeadershipLost) && !errors.Is(err, ErrLeaseInDoubt) {
		t.Fatalf("cause %v, want ErrLeadershipLost or ErrLeaseInDoubt", err)
	}
	release() // the cancelled operation ends
	deadline := time.After(within)
	for {
		ch := a.Changed()
		if t2, ok := a.Token(); ok && t2.Revision > tok.Revision {
			if t2.Lease == tok.Lease {
				t.Fatal("new term on the revoked lease")
			}
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatal("no new term after the lease was revoked")
		}
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	cli := &clientv3.Client{}
	for field, cfg := range map[string]Config{
		"Client":       {Prefix: "/p", Name: "a"},
		"Prefix":       {Client: cli, Prefix: "/p/", Name: "a"},
		"Name":         {Client: cli, Prefix: "/p"},
		"TTL":          {Client: cli, Prefix: "/p", Name: "a", TTL: 1500 * time.Millisecond},
		"SafetyMargin": {Client: cli, Prefix: "/p", Name: "a", TTL: 2 * time.Second, SafetyMargin: time.Second},
	} {
		_, err := New(cfg, nil)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
}
