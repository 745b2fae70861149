package lease

import (
	"context"
	"sync"
	"time"
)

// slotClaim is this replica's claim on one slot, from the write of the
// slot's Lease that named it the holder until it is released or lost.
// Its context is cancelled, with the reason as its cause, when the claim
// ends; every operation context under the claim derives from it.
type slotClaim struct {
	slot  int
	token Token
	since time.Time
	ctx   context.Context
	end   context.CancelCauseFunc

	mu       sync.Mutex
	draining bool // handing over: nothing more starts
	ops      int  // operations started and not released
	drained  chan struct{}
}

func newSlotClaim(slot int, tok Token) *slotClaim {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &slotClaim{slot: slot, token: tok, since: time.Now(), ctx: ctx, end: cancel, drained: make(chan struct{})}
}

// start begins an operation under the claim: a context derived from ctx
// that carries the claim's token and ends with the claim, and its
// release. ok is false once the claim drains or has ended.
func (c *slotClaim) start(ctx context.Context) (context.Context, func(), bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining || c.ctx.Err() != nil {
		return nil, nil, false
	}
	c.ops++
	opCtx, cancel := context.WithCancelCause(context.WithValue(ctx, tokenKey{}, c.token))
	stop := context.AfterFunc(c.ctx, func() { cancel(context.Cause(c.ctx)) })
	var once sync.Once
	return opCtx, func() {
		once.Do(func() {
			stop()
			cancel(nil)
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.ops--; c.ops == 0 && c.draining {
				close(c.drained)
			}
		})
	}, true
}

// drain stops new operations; the channel returned is closed once none
// is in flight.
func (c *slotClaim) drain() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.draining {
		c.draining = true
		if c.ops == 0 {
			close(c.drained)
		}
	}
	return c.drained
}
