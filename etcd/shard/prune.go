package shard

import (
	"context"
	"sync"

	"github.com/converge-go/converge/etcd/internal/ownership"
)

// pruneScope is what a Prune's context carries: the claims this replica
// held when the Prune was acquired, by slot.
type pruneScope struct {
	claims map[int]*ownership.Claim
}

type pruneScopeKey struct{}

// acquirePrune is Acquire(ctx, nil): the context a Prune runs under.
//
// A Prune over the slots this replica holds is fenced soundly when three
// things hold, and this is what gives them:
//
//   - it removes only what belongs to the slots it holds: the context
//     remembers the claims held now, and Acquire(pruneCtx, key), which the
//     target calls before each removal, succeeds only for a key whose
//     slot is still held under the very claim remembered, with that
//     claim's token (a slot gained later is not in the scope: its desired
//     objects may not be in the Prune's snapshot);
//   - the desired objects it is given are those of the same slots: the
//     engine reads which keys it owns after Acquire, and any change of
//     the owned slots from Acquire on cancels the context (cause
//     ErrOwnershipChanged), so a Prune whose snapshot and scope could
//     differ removes nothing more;
//   - a slot being handed over waits for the removals in flight, each of
//     which holds an operation of the slot's claim.
//
// ok is false when this replica holds no slot: it prunes nothing.
func (m *Manager) acquirePrune(ctx context.Context) (context.Context, func(), bool) {
	changed := m.changed.Changed() // before looking: a change meanwhile closes it
	scope := pruneScope{claims: map[int]*ownership.Claim{}}
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
func inPruneScope(ctx context.Context, slot int, c *ownership.Claim) bool {
	scope, ok := ctx.Value(pruneScopeKey{}).(pruneScope)
	return !ok || scope.claims[slot] == c
}
