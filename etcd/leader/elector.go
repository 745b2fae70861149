package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/fencing"
	"github.com/converge-go/converge/etcd/internal/lease"
	"github.com/converge-go/converge/etcd/internal/ownership"
	"github.com/converge-go/converge/etcd/internal/watch"
	"github.com/converge-go/converge/reconciler"
)

// Elector campaigns for leadership of one election and, while it leads,
// lets the reconcilers it governs run. It is the Ownership of leader-only
// reconcilers: Owns reports whether it leads, Acquire hands out operation
// contexts that carry the term's fencing token and end with the term.
//
// Construct it with New and run it with Run (Cell does both in a hive).
type Elector struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	term     *ownership.Claim // the current term; nil unless leading
	governed []Governed
	changed  ownership.Notifier
	terms    uint64 // terms started, for tests and logs
}

// Governed is what the elector needs of a reconciler: reconciler.Reconciler
// has both. Construct governed reconcilers with Config.StartSuspended so
// that nothing runs before the first term.
type Governed interface {
	Suspend()
	Resume()
}

var _ reconciler.Ownership = (*Elector)(nil)

// New validates cfg and returns an elector that is not campaigning yet.
// It fails with an error wrapping ErrInvalidConfig that names the field.
func New(cfg Config, log *slog.Logger) (*Elector, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Elector{cfg: cfg, log: log.With("election", cfg.Prefix, "name", cfg.Name)}, nil
}

// Run campaigns until ctx ends, leading whenever elected, and then resigns.
// Each session's lease is watched; when it is in doubt or the election key
// disappears, the term ends (see Acquire) and a new session campaigns.
// Errors talking to etcd are logged and retried after RetryInterval; Run
// returns nil once ctx ends.
func (e *Elector) Run(ctx context.Context) error {
	for {
		err := e.runSession(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			e.log.Warn("election: starting over", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(e.cfg.RetryInterval):
		}
	}
}

// runSession runs one session: a campaign and at most one term. A lost term
// always ends its session, so that the next campaign starts with a fresh
// lease and key instead of trusting one that was in doubt.
func (e *Elector) runSession(ctx context.Context) error {
	s, err := lease.Start(ctx, e.cfg.Client, e.cfg.TTL, e.cfg.SafetyMargin)
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	defer func() {
		// Revoking the lease deletes the election key: a clean stop and a
		// lost term resign at once, and a standby's Campaign returns.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.ResignTimeout)
		defer cancel()
		s.Close(rctx)
	}()
	cctx, cancel := context.WithCancel(ctx)
	// A campaign whose lease is in doubt is over (#19597).
	go func() {
		select {
		case <-s.Lost():
			cancel()
		case <-cctx.Done():
		}
	}()
	tok, err := e.campaign(cctx, s)
	cancel()
	if err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	if err := e.verify(ctx, s, tok); err != nil {
		return err
	}
	return e.lead(ctx, s, tok)
}

// verify checks, after Campaign returned, that this replica's election key
// still exists with the revision Campaign created it at and is the oldest
// key of the election, in one read, before the lease can be in doubt. This
// is the check Campaign itself does not make (#19597).
func (e *Elector) verify(ctx context.Context, s *lease.Session, tok fencing.Token) error {
	vctx, cancel := context.WithDeadline(clientv3.WithRequireLeader(ctx), s.Deadline())
	defer cancel()
	var resp *clientv3.TxnResponse
	var err error
	// The check writes nothing: a member that refused it as unavailable
	// (no leader) is simply asked again, and round robin asks the next.
	for try := 0; try == 0 || (err != nil && retriable(err) && vctx.Err() == nil && try <= maxTries); try++ {
		cctx, cancel := call(vctx)
		resp, err = e.cfg.Client.Txn(cctx).
			If(tok.Compare()).
			Then(clientv3.OpGet(e.cfg.Prefix+"/", append(clientv3.WithFirstCreate(), clientv3.WithKeysOnly())...)).
			Commit()
		cancel()
	}
	if err != nil {
		return fmt.Errorf("verify %s: %w", tok, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %s", ErrCampaignStale, tok)
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 || string(kvs[0].Key) != tok.Key {
		return fmt.Errorf("%w: %s is not the oldest key", ErrCampaignStale, tok)
	}
	select {
	case <-s.Lost():
		return fmt.Errorf("verify %s: %w", tok, ErrLeaseInDoubt)
	default:
	}
	return nil
}

// lead holds one term until the lease is in doubt, the election key is
// deleted, or ctx ends.
func (e *Elector) lead(ctx context.Context, s *lease.Session, tok fencing.Token) error {
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	// Watch from the key's creation on, so that a delete that already
	// happened is seen too; a watch that cannot go blind (package watch),
	// since its silence is taken to mean the key is still there.
	w := watch.New(wctx, e.cfg.Client, tok.Key, tok.Revision+1, 0)
	defer w.Stop()
	wch := w.C()

	e.startTerm(ownership.NewClaim(tok))
	e.log.Info("leading", "token", tok)

	var cause error
	for cause == nil {
		select {
		case <-s.Lost():
			cause = ErrLeaseInDoubt
		case <-ctx.Done():
			cause = ErrStopped
		case wr, ok := <-wch:
			switch {
			case !ok || wr.Err != nil:
				// Without a watch a deleted key would go unnoticed
				// until the lease is in doubt; step down now.
				cause = fmt.Errorf("%w: watch of %s ended", ErrLeadershipLost, tok.Key)
			default:
				for _, ev := range wr.Events {
					if ev.Type == clientv3.EventTypeDelete {
						cause = fmt.Errorf("%w: %s deleted", ErrLeadershipLost, tok.Key)
					}
				}
			}
		}
	}
	if errors.Is(cause, ErrStopped) {
		e.drainTerm(s)
	}
	if t := e.endTerm(cause); t != nil {
		// Cancelled operations, too, end before the lease is revoked and
		// a standby can start, unless the lease will have expired by then
		// anyway.
		until := time.Now().Add(e.cfg.ResignTimeout)
		if !errors.Is(cause, ErrStopped) {
			until = s.Deadline().Add(e.cfg.SafetyMargin)
		}
		e.waitDrained(t, until)
	}
	e.log.Info("no longer leading", "token", tok, "cause", cause)
	if errors.Is(cause, ErrStopped) {
		return nil
	}
	return cause
}

// startTerm makes t the current term and resumes the governed reconcilers.
func (e *Elector) startTerm(t *ownership.Claim) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.term = t
	e.terms++
	for _, g := range e.governed {
		g.Resume()
	}
	e.changed.Notify()
}

// drainTerm, at a clean stop, suspends the governed reconcilers and stops
// new operations, then waits until those in flight have been released,
// ResignTimeout has passed, or the lease is in doubt: a standby starts only
// once the old leader's operations have ended.
func (e *Elector) drainTerm(s *lease.Session) {
	e.mu.Lock()
	t := e.term
	for _, g := range e.governed {
		g.Suspend()
	}
	if t != nil {
		t.Drain()
		e.changed.Notify()
	}
	e.mu.Unlock()
	if t == nil {
		return
	}
	timer := time.NewTimer(e.cfg.ResignTimeout)
	defer timer.Stop()
	select {
	case <-t.Drain():
	case <-timer.C:
	case <-s.Lost():
	}
}

// endTerm ends the current term: from here on nothing is acquired, every
// operation context of the term is cancelled with cause, and the governed
// reconcilers are suspended.
func (e *Elector) endTerm(cause error) *ownership.Claim {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.term
	if t == nil {
		return nil
	}
	e.term = nil
	t.End(cause)
	for _, g := range e.governed {
		g.Suspend()
	}
	e.changed.Notify()
	return t
}

// waitDrained waits until every operation of the ended term t has been
// released, or until passes.
func (e *Elector) waitDrained(t *ownership.Claim, until time.Time) {
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	select {
	case <-t.Drain():
	case <-timer.C:
	}
}
