package reconciler

import (
	"context"
	"sync"

	"github.com/cilium/statedb"
)

// progress publishes how far the loop has got, for WaitUntilReconciled.
type progress struct {
	mu         sync.Mutex
	reconciled statedb.Revision
	retryLow   statedb.Revision
	changed    chan struct{} // closed and replaced on every change
}

func newProgress() *progress {
	return &progress{changed: make(chan struct{}), retryLow: 1}
}

// set publishes new values and wakes the waiters if anything changed.
func (p *progress) set(reconciled, retryLow statedb.Revision) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if reconciled == p.reconciled && retryLow == p.retryLow {
		return
	}
	p.reconciled, p.retryLow = reconciled, retryLow
	close(p.changed)
	p.changed = make(chan struct{})
}

// wait blocks until every change up to rev has been attempted.
func (p *progress) wait(ctx context.Context, rev statedb.Revision) (statedb.Revision, statedb.Revision, error) {
	return p.waitUntil(ctx, func(reconciled, _ statedb.Revision) bool { return reconciled >= rev })
}

// waitUntil blocks until done accepts the published values or ctx ends.
func (p *progress) waitUntil(ctx context.Context, done func(reconciled, retryLow statedb.Revision) bool) (statedb.Revision, statedb.Revision, error) {
	for {
		p.mu.Lock()
		reconciled, retryLow, changed := p.reconciled, p.retryLow, p.changed
		p.mu.Unlock()
		if done(reconciled, retryLow) {
			return reconciled, retryLow, nil
		}
		select {
		case <-ctx.Done():
			return reconciled, retryLow, ctx.Err()
		case <-changed:
		}
	}
}
