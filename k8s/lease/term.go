package lease

import (
	"context"
	"sync"
	"time"
)

// term is one stretch of leadership. Its context is cancelled, with the
// reason as its cause, when it ends; every operation context of the term
// derives from it.
type term struct {
	token  Token
	ctx    context.Context
	cancel context.CancelCauseFunc

	// Under the Elector's mu:
	until    time.Time // the renew deadline: valid before it
	draining bool      // a clean stop: nothing more is acquired
	ops      int       // operations acquired and not released
	drained  chan struct{}
}

func newTerm(tok Token, until time.Time) *term {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &term{token: tok, ctx: ctx, cancel: cancel, until: until, drained: make(chan struct{})}
}

// valid reports whether operations may start under t at now.
func (t *term) valid(now time.Time) bool { return !t.draining && now.Before(t.until) }

// acquire starts an operation under t: a context derived from ctx that
// carries t's token and ends with t. The caller holds the Elector's mu.
func (t *term) acquire(ctx context.Context, mu *sync.Mutex) (context.Context, func()) {
	t.ops++
	opCtx, cancel := context.WithCancelCause(context.WithValue(ctx, tokenKey{}, t.token))
	stop := context.AfterFunc(t.ctx, func() { cancel(context.Cause(t.ctx)) })
	var once sync.Once
	return opCtx, func() {
		once.Do(func() {
			stop()
			cancel(nil)
			mu.Lock()
			defer mu.Unlock()
			if t.ops--; t.ops == 0 && t.draining {
				close(t.drained)
			}
		})
	}
}

// drain stops new operations; the caller holds the Elector's mu. The
// channel returned is closed once none is in flight.
func (t *term) drain() <-chan struct{} {
	if !t.draining {
		t.draining = true
		if t.ops == 0 {
			close(t.drained)
		}
	}
	return t.drained
}
