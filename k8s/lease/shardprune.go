package lease

import (
	"context"
	"sync"
)

// pruneScope is what a Prune's context carries: the claims this replica
// held when the Prune was acquired, by slot.
type pruneScope struct {
	claims map[int]*slotClaim
}

type pruneScopeKey struct{}

// acquirePrune is Acquire(ctx, nil): the context a Prune runs under. It
// remembers the claims held now, so that Acquire(pruneCtx, key), which the
// target calls before each removal, succeeds only for a key whose slot is
// still held under the very claim remembered (a slot gained later is not
// in the scope: its desired objects may not be in the Prune's snapshot).
// Any change of the owned slots cancels the context (ErrOwnershipChanged),
// because the engine reads the keys it owns, for the Prune's snapshot,
// after Acquire. ok is false when no slot is held: nothing is pruned.
func (m *Sharder) acquirePrune(ctx context.Context) (context.Context, func(), bool) {
	changed := m.Changed() // before looking: a change meanwhile closes it
	if !m.valid() {
		return nil, nil, false
	}
	scope := pruneScope{claims: map[int]*slotClaim{}}
	for s := range m.claims {
		if c := m.claims[s].Load(); c != nil {
			scope.claims[s] = c
		}
	}
	if len(scope.claims) == 0 {
		return nil, nil, false
	}
	opCtx, cancel := context.WithCancelCause(context.WithValue(ctx, pruneScopeKey{}, scope))
	stop := make(chan struct{})
	go func() {
		select {
		case <-changed:
			cancel(ErrOwnershipChanged)
		case <-opCtx.Done():
		case <-stop:
		}
	}()
	var once sync.Once
	return opCtx, func() {
		once.Do(func() {
			close(stop)
			cancel(context.Canceled)
		})
	}, true
}

// inPruneScope reports whether an operation on slot may start under ctx:
// always outside a Prune, and inside one only while the slot is held
// under the claim the Prune's scope remembers.
func inPruneScope(ctx context.Context, slot int, c *slotClaim) bool {
	scope, ok := ctx.Value(pruneScopeKey{}).(pruneScope)
	return !ok || scope.claims[slot] == c
}
