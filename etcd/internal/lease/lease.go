// Package lease keeps an etcd session (concurrency.Session: a lease and its
// keepalives) and tells its users when the lease is in doubt, early enough
// to stop acting before the lease can have expired for anyone else.
//
// concurrency.Session closes Done only once its keepalive stream ends,
// which on a partition happens long after the server has expired the lease.
// Session here also watches the keepalive responses and declares the lease
// in doubt when none has arrived for TTL minus a safety margin: a response
// received at time r means the server renewed the lease at most a round trip
// before r, so the lease cannot expire before r + TTL - round trip.
//
// The client's keepalive stream runs on one connection to one member. When
// that member stops answering without closing the connection (a
// partition), nothing notices for a long time: gRPC will not send its own
// pings more often than every 10 s. So when a renewal is overdue, Session
// also probes: a single keepalive (KeepAliveOnce, a new stream, which the
// client's round robin sends to the next member) every probeEvery, and a
// probe's answer renews the lease as a stream's would.
package lease

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// probeEvery is the pause between two probes once a renewal is overdue, and
// probeTimeout bounds each: a probe that lands on the silent member waits
// out its timeout while the next ones try other members.
const (
	probeEvery   = 250 * time.Millisecond
	probeTimeout = time.Second
)

// Session is a concurrency.Session with a sure lower bound on when its
// lease can expire.
type Session struct {
	*concurrency.Session

	ttl, margin time.Duration
	lost        chan struct{} // closed once the lease is in doubt
	cancel      context.CancelFunc
	done        chan struct{} // closed when the watcher goroutine ends

	mu       sync.Mutex
	deadline time.Time // in doubt from here on
}

// Start grants a lease of ttl (whole seconds) and keeps it alive until
// Close, whatever happens to ctx (which bounds only the grant). margin is
// subtracted from every renewal's expiry to cover the round trip and clock
// rate error; it must be below ttl.
func Start(ctx context.Context, cli *clientv3.Client, ttl, margin time.Duration) (*Session, error) {
	// The server can grant the lease no earlier than now, so it cannot
	// expire before now + ttl.
	start := time.Now()
	grant, err := cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return nil, err
	}
	// The keepalives must outlive ctx: a clean stop drains operations
	// under the lease after ctx ended, and only Close ends the lease.
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s, err := concurrency.NewSession(cli, concurrency.WithLease(grant.ID), concurrency.WithContext(kctx))
	if err != nil {
		cancel()
		return nil, err
	}
	// A second listener on the same lease: the client multiplexes
	// keepalives per lease, so this adds no traffic.
	ka, err := cli.KeepAlive(kctx, s.Lease())
	if err != nil {
		cancel()
		s.Orphan()
		return nil, err
	}
	ls := &Session{
		Session: s, ttl: ttl, margin: margin,
		lost: make(chan struct{}), cancel: cancel, done: make(chan struct{}),
		deadline: start.Add(ttl - margin),
	}
	go ls.watch(kctx, ka)
	return ls, nil
}

// Lost returns a channel that is closed once the lease is in doubt: the
// session is Done, no keepalive has succeeded for TTL minus the margin, or
// the session was closed. It is never reopened; start a new Session.
func (s *Session) Lost() <-chan struct{} { return s.lost }

// Deadline returns the time from which the lease is in doubt unless a
// keepalive succeeds before it.
func (s *Session) Deadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

func (s *Session) watch(ctx context.Context, ka <-chan *clientv3.LeaseKeepAliveResponse) {
	var probes sync.WaitGroup
	defer close(s.done)
	defer probes.Wait()
	defer close(s.lost) // first: in doubt at once, whatever probes still run
	timer := time.NewTimer(time.Until(s.Deadline()))
	defer timer.Stop()
	// The client renews every TTL/3; a renewal is overdue half a second
	// after that.
	overdue := s.ttl/3 + 500*time.Millisecond
	probe := time.NewTimer(overdue)
	defer probe.Stop()
	probed := make(chan renewal, 1)
	for {
		var r renewal
		select {
		case resp, ok := <-ka:
			if !ok || resp == nil || resp.TTL <= 0 {
				return
			}
			// Renewed at the server at most a round trip ago: the
			// margin covers that.
			r = renewal{ttl: resp.TTL, at: time.Now()}
		case r = <-probed:
			if r.ttl <= 0 {
				return // the lease is gone at the server
			}
		case <-probe.C:
			probes.Add(1)
			go func() {
				defer probes.Done()
				s.probe(ctx, probed)
			}()
			probe.Reset(probeEvery)
			continue
		case <-timer.C:
			return
		case <-s.Session.Done():
			return
		case <-ctx.Done():
			return
		}
		s.extend(r.at.Add(time.Duration(r.ttl)*time.Second - s.margin))
		timer.Reset(time.Until(s.Deadline()))
		probe.Reset(overdue)
	}
}

// extend moves the deadline to d, never back: a probe's answer can come
// after a newer renewal's.
func (s *Session) extend(d time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.After(s.deadline) {
		s.deadline = d
	}
}

// renewal is a renewal of the lease for ttl seconds that the server made
// no earlier than at; ttl 0: the lease is gone.
type renewal struct {
	ttl int64
	at  time.Time
}

// probe sends one keepalive of the lease and reports the renewal on
// probed, unless another report is waiting there or the probe failed. The
// renewal counts from when the probe was sent: its round trip may be
// longer than the margin.
func (s *Session) probe(ctx context.Context, probed chan<- renewal) {
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	r := renewal{at: time.Now()}
	resp, err := s.Client().KeepAliveOnce(pctx, s.Lease())
	switch {
	case err == nil:
		r.ttl = resp.TTL
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
	default:
		return
	}
	select {
	case probed <- r:
	default:
	}
}

// Close ends the session: it revokes the lease (which deletes every key
// attached to it) within at most ctx's deadline, and stops the keepalives.
// When etcd cannot be reached the lease expires on its own.
func (s *Session) Close(ctx context.Context) {
	// Revoke with our own deadline: concurrency.Session.Close would wait
	// up to a whole TTL.
	_, _ = s.Client().Revoke(ctx, s.Lease())
	s.cancel()
	<-s.done
	s.Orphan()
}
