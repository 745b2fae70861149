package lease

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/etcd/internal/etcdcluster"
)

// The member that carries the keepalive stream stops answering without
// closing the connection, as in a partition; another member answers. The
// session's probes reach it and keep the lease out of doubt for two TTLs,
// where the stream alone would have let it lapse after TTL - margin.
//
// The client itself gives up on its keepalive stream a TTL after the
// stream's last answer, or, when none came, DialTimeout + 1 s after it
// began; a short DialTimeout puts both within the two TTLs, so the
// session must outlive the client's own keepalive either way.
func TestSessionSurvivesASilentMember(t *testing.T) {
	const ttl, margin = 2 * time.Second, 400 * time.Millisecond
	c := etcdcluster.Start(t, 1)
	silent := etcdcluster.NewProxy(t, c.Endpoints()[0])
	other := etcdcluster.NewProxy(t, c.Endpoints()[0])
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{silent.Endpoint()},
		DialTimeout: 500 * time.Millisecond,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	s, err := Start(ctx, cli, ttl, margin)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	// The stream stays on the connection through silent.
	cli.SetEndpoints(silent.Endpoint(), other.Endpoint())
	silent.Cut()
	defer silent.Restore()

	timer := time.NewTimer(2 * ttl)
	defer timer.Stop()
	select {
	case <-s.Lost():
		t.Fatal("lease in doubt although a member answers")
	case <-timer.C:
	}
	// And the lease really is alive at the server (-1: expired; the
	// seconds left are rounded down, so 0 is alive).
	resp, err := etcdcluster.NewClient(t, other.Endpoint()).TimeToLive(ctx, s.Lease())
	if err != nil {
		t.Fatal(err)
	}
	if resp.TTL < 0 {
		t.Fatal("the lease expired at the server")
	}
}

// Nothing answers: the lease is in doubt by its deadline, not later.
func TestSessionInDoubtWhenNothingAnswers(t *testing.T) {
	const ttl, margin = 2 * time.Second, 400 * time.Millisecond
	c := etcdcluster.Start(t, 1)
	p := etcdcluster.NewProxy(t, c.Endpoints()[0])
	cli := etcdcluster.NewClient(t, p.Endpoint())
	ctx := context.Background()
	s, err := Start(ctx, cli, ttl, margin)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	p.Cut()
	defer p.Restore()
	timer := time.NewTimer(ttl) // the deadline is at most TTL - margin away
	defer timer.Stop()
	select {
	case <-s.Lost():
	case <-timer.C:
		t.Fatal("lease not in doubt a TTL after etcd stopped answering")
	}
}

// Probing never starts before the client's own renewal is due, nor later
// than when it is overdue, and leaves room for probesBefore probes before
// the deadline whenever the renewal interval allows it.
func TestProbeStart(t *testing.T) {
	for _, ttl := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 10 * time.Second, time.Minute} {
		for _, margin := range []time.Duration{0, 200 * time.Millisecond, ttl / 5, ttl/2 - time.Millisecond} {
			window := ttl - margin
			start := probeStart(ttl, window)
			renew, overdue := ttl/3, ttl/3+500*time.Millisecond
			if start < renew || start > overdue {
				t.Errorf("ttl %v margin %v: probing starts at %v, outside [%v, %v]", ttl, margin, start, renew, overdue)
			}
			room := probesBefore * probeEvery
			if window-renew >= room && window-start < room {
				t.Errorf("ttl %v margin %v: probing starts at %v, %v before the deadline: room for fewer than %d probes", ttl, margin, start, window-start, probesBefore)
			}
		}
	}
}

// A lease revoked at the server is in doubt as soon as a keepalive finds
// it gone, long before its deadline: the client closes its channel rather
// than deliver TTL 0, and the probe that follows finds the lease missing.
func TestSessionLostWhenLeaseRevoked(t *testing.T) {
	const ttl, margin = 10 * time.Second, 2 * time.Second
	c := etcdcluster.Start(t, 1)
	cli := c.Client(t)
	ctx := context.Background()
	s, err := Start(ctx, cli, ttl, margin)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if _, err := cli.Revoke(ctx, s.Lease()); err != nil {
		t.Fatal(err)
	}
	timer := time.NewTimer(ttl)
	defer timer.Stop()
	select {
	case <-s.Lost():
		if now, d := time.Now(), s.Deadline(); !now.Before(d) {
			t.Fatalf("in doubt only by the deadline (%v), not when the lease was found gone", d)
		}
	case <-timer.C:
		t.Fatal("lease not in doubt a TTL after it was revoked")
	}
}
