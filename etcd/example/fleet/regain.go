package main

import (
	"context"
	"slices"
	"time"

	"github.com/cilium/hive/cell"

	"github.com/converge-go/converge/reconciler"
)

// scopes is how the replica's ownership is cut up: slots when sharded,
// one scope (the whole set) when leader-only.
type scopes struct {
	ownership reconciler.Ownership
	// owned returns the scopes owned now, sorted.
	owned func() []int
	// of returns a group's scope.
	of func(name string) int
	// since returns when the scope was claimed, while it is owned.
	since func(scope int) (time.Time, bool)
}

// pruneRegained triggers a full reconciliation (its prune) each time this
// replica comes to own scopes it did not own, so that the new owner also
// removes from the fleet the groups of those scopes nobody desires any
// more. The groups themselves need nothing from it: the reconciler applies
// every newly owned group at once, those Done here under an earlier
// ownership included (another owner may have changed the fleet since).
func pruneRegained(ctx context.Context, sc scopes, prune func()) error {
	var had []int
	for {
		changed := sc.ownership.Changed() // before looking: a change meanwhile closes it
		now := sc.owned()
		if len(newlyOwned(had, now)) > 0 {
			prune()
		}
		had = now
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		}
	}
}

// newlyOwned returns the scopes of now that are not in had.
func newlyOwned(had, now []int) map[int]bool {
	gained := map[int]bool{}
	for _, s := range now {
		if _, found := slices.BinarySearch(had, s); !found {
			gained[s] = true
		}
	}
	return gained
}

// regainJob is pruneRegained as a hive job function.
func regainJob(sc scopes, prune func()) func(context.Context, cell.Health) error {
	return func(ctx context.Context, _ cell.Health) error { return pruneRegained(ctx, sc, prune) }
}
