package main

import (
	"context"
	"slices"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

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
}

// refreshRegained marks Refreshing every Done group of a scope this
// replica has just come to own, so that the reconciler applies it again,
// and then calls prune, so that the new owner also removes from the fleet
// the groups of those scopes nobody desires any more.
//
// The reconciler reconciles the newly owned groups that are Pending or in
// Error at once, but not those Done here: this replica applied them in an
// earlier ownership, and another replica may have changed the fleet since
// (a spec changed and changed back while the source folded the two into
// none, or an instance replaced). A new owner must not trust what it did
// before it lost the group. Refreshing is a status this reconciler
// understands as "apply again"; a write of the reconciler's own that
// crosses this one is not committed (it compares the status it read).
func refreshRegained(ctx context.Context, db *statedb.DB, groups statedb.RWTable[*Group], sc scopes, prune func()) error {
	var had []int
	for {
		changed := sc.ownership.Changed() // before looking: a change meanwhile closes it
		now := sc.owned()
		if gained := newlyOwned(had, now); len(gained) > 0 {
			markRefreshing(db, groups, sc, gained)
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

func markRefreshing(db *statedb.DB, groups statedb.RWTable[*Group], sc scopes, gained map[int]bool) {
	w := db.WriteTxn(groups)
	defer w.Abort()
	for g := range groups.All(w) {
		if g.Status.Kind == reconciler.StatusKindDone && gained[sc.of(g.Name)] {
			_, _, _ = groups.Insert(w, setGroupStatus(cloneGroup(g), reconciler.StatusRefreshing()))
		}
	}
	w.Commit()
}

// regainJob is refreshRegained as a hive job function.
func regainJob(db *statedb.DB, groups statedb.RWTable[*Group], sc scopes, prune func()) func(context.Context, cell.Health) error {
	return func(ctx context.Context, _ cell.Health) error { return refreshRegained(ctx, db, groups, sc, prune) }
}
