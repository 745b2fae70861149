// Package ownership holds what the leader and shard packages share in
// implementing the engine's reconciler.Ownership: a notifier for Changed,
// and the derivation of an operation's context from the claim it runs
// under.
package ownership

import (
	"context"
	"sync"
	"time"

	"github.com/converge-go/converge/etcd/fencing"
)

// Notifier hands out a channel that is closed at the next Notify.
// The zero value is ready to use.
type Notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

// Changed returns the channel the next Notify closes.
func (n *Notifier) Changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// Notify closes the channel handed out by Changed, if any.
func (n *Notifier) Notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}

// Claim is one claim of ownership (a leader's term, a replica's hold on a
// slot) and the operations in flight under it. End cancels them all before
// it returns, so that once a claim has ended, no operation of it still
// believes it runs under the claim.
type Claim struct {
	token fencing.Token
	since time.Time // when the claim was made, before any operation under it

	mu       sync.Mutex
	cause    error // non-nil once ended
	inflight map[*op]struct{}
	drained  chan struct{} // closed when inflight is empty after Drain; nil if not draining
	ended    chan struct{}
}

type op struct{ cancel context.CancelCauseFunc }

// NewClaim returns a live claim with token tok.
func NewClaim(tok fencing.Token) *Claim {
	return &Claim{token: tok, since: time.Now(), inflight: map[*op]struct{}{}, ended: make(chan struct{})}
}

// Since returns when the claim was made here: before any operation under
// it started, so a result stamped earlier came from before the claim.
func (c *Claim) Since() time.Time { return c.since }

// Token returns the claim's fencing token.
func (c *Claim) Token() fencing.Token { return c.token }

// Start begins an operation under the claim: opCtx is derived from ctx,
// carries the token, and is cancelled with the claim's cause when the claim
// ends. release must be called once the operation has ended. ok is false,
// and nothing may start, once the claim has ended or is draining.
func (c *Claim) Start(ctx context.Context) (opCtx context.Context, release func(), ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cause != nil || c.drained != nil {
		return nil, nil, false
	}
	opCtx, cancel := context.WithCancelCause(fencing.WithToken(ctx, c.token))
	o := &op{cancel: cancel}
	c.inflight[o] = struct{}{}
	var once sync.Once
	return opCtx, func() {
		once.Do(func() {
			cancel(context.Canceled)
			c.mu.Lock()
			defer c.mu.Unlock()
			delete(c.inflight, o)
			if len(c.inflight) == 0 && c.drained != nil {
				select {
				case <-c.drained:
				default:
					close(c.drained)
				}
			}
		})
	}, true
}

// Drain stops new operations from starting under the claim and returns a
// channel that is closed once every operation in flight has been released.
// The claim stays live: operations in flight keep their context.
func (c *Claim) Drain() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.drained == nil {
		c.drained = make(chan struct{})
		if len(c.inflight) == 0 {
			close(c.drained)
		}
	}
	return c.drained
}

// Draining reports whether Drain was called.
func (c *Claim) Draining() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.drained != nil
}

// InFlight returns the number of operations started and not yet released.
func (c *Claim) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.inflight)
}

// End ends the claim with cause: nothing starts under it any more, and the
// context of every operation in flight is cancelled with cause before End
// returns. Only the first call has an effect.
func (c *Claim) End(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cause != nil {
		return
	}
	c.cause = cause
	for o := range c.inflight {
		o.cancel(cause)
	}
	close(c.ended)
}

// Ended returns a channel that is closed when the claim ends.
func (c *Claim) Ended() <-chan struct{} { return c.ended }
