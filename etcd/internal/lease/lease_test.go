package lease

import (
	"context"
	"testing"
	"time"

	"github.com/converge-go/converge/etcd/internal/etcdcluster"
)

// The member that carries the keepalive stream stops answering without
// closing the connection, as in a partition; another member answers. The
// session's probes reach it and keep the lease out of doubt for two TTLs,
// where the stream alone would have let it lapse after TTL - margin.
func TestSessionSurvivesASilentMember(t *testing.T) {
	const ttl, margin = 2 * time.Second, 400 * time.Millisecond
	c := etcdcluster.Start(t, 1)
	silent := etcdcluster.NewProxy(t, c.Endpoints()[0])
	other := etcdcluster.NewProxy(t, c.Endpoints()[0])
	cli := etcdcluster.NewClient(t, silent.Endpoint())
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
