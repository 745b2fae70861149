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
//
// The client closes its keepalive channel a TTL after the stream's last
// answer, and concurrency.Session's Done with it, although the probes keep
// the lease alive at the server. So neither ends a Session: from then on
// probes alone renew the lease, until one finds it gone or none answers
// before the deadline. Lost, not the embedded Session's Done, is the
// signal.
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

// grantTimeout bounds the grant of a session's lease.
const grantTimeout = 2 * time.Second

// revokeRetry is the pause between two tries of a revoke at Close.
const revokeRetry = 50 * time.Millisecond

// probesBefore is how many probes, at least, are sent before the deadline
// when no renewal comes: a probe may land on the silent member, and the
// next one must still have time to reach another and come back.
const probesBefore = 3

// probeStart returns how long after a renewal probing starts, for a lease
// of ttl that is in doubt window after a renewal. The client renews every
// TTL/3 (on a 500 ms tick), so a renewal is overdue half a second after
// that; but with a short TTL that would leave room for only one or two
// probes before the deadline, so probing then starts earlier, though never
// before the client's own renewal is due.
func probeStart(ttl, window time.Duration) time.Duration {
	overdue := ttl/3 + 500*time.Millisecond
	return max(min(overdue, window-probesBefore*probeEvery), ttl/3)
}

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
	// A member without a leader refuses at once instead of holding the
	// grant until its own request timeout, and one just cut from its
	// peers, which still believes it has a leader, is given up on after
	// grantTimeout (a grant applied meanwhile expires unused).
	gctx, gcancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), grantTimeout)
	defer gcancel()
	grant, err := cli.Grant(gctx, int64(ttl/time.Second))
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

// Lost returns a channel that is closed once the lease is in doubt: no
// keepalive has succeeded for TTL minus the margin, a keepalive found the
// lease gone, or the session was closed. It is never reopened; start a
// new Session.
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
	overdue := probeStart(s.ttl, s.ttl-s.margin)
	probe := time.NewTimer(overdue)
	defer probe.Stop()
	probed := make(chan renewal, 1)
	for {
		var r renewal
		select {
		case resp, ok := <-ka:
			if !ok || resp == nil {
				// The client gave up on its stream: no answer for a
				// TTL (its member went silent), or the lease is gone
				// (it closes rather than deliver TTL 0). A probe now
				// tells which; from here on probes alone renew.
				ka = nil
				probe.Reset(0)
				continue
			}
			if resp.TTL <= 0 {
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
	// up to a whole TTL. A member between two etcd leaders drops the
	// revoke at once: try again, on the next member, until the deadline,
	// rather than leave the lease to expire a TTL later.
	for {
		_, err := s.Client().Revoke(clientv3.WithRequireLeader(ctx), s.Lease())
		// Past the deadline plus the margin, the lease has expired anyway.
		expired := time.Now().After(s.Deadline().Add(s.margin))
		if err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) || ctx.Err() != nil || expired {
			break
		}
		select {
		case <-time.After(revokeRetry):
		case <-ctx.Done():
		}
	}
	s.cancel()
	<-s.done
	s.Orphan()
}
