package reconciler

import (
	"iter"
	"slices"
	"time"

	"github.com/cilium/statedb"
)

// What the target may hold, as the dependency graph knows it (applied):
// an Update counts from its start (depApply), what earlier attempts
// named stays until one succeeds (narrow), and a successful Delete, or
// another replica taking the key, ends it (depGone). A key's Delete waits
// while an applied object names it (users); the last one to stop naming
// it releases that Delete (dropUser). What was in the table as the run
// began counts as applied (seed). The common edge, an object naming one
// dependency, is one entry of two strings (named); an object naming
// several has a list (namedAll).

// depSettled records that key's operation succeeded: its Update of an
// object naming deps, or its Delete.
func (t *requests[Obj]) depSettled(key string, deps []string, deleted bool, now time.Time) {
	if deleted {
		t.depGone(key, now)
		return
	}
	t.narrow(key, deps, now)
	t.depDone(key, now)
}

// depApply records, as an Update of obj on key starts, that the target
// may hold obj from now on, naming its dependencies: their Deletes wait
// for it from the start of the attempt (it may succeed, or half succeed,
// whatever its result says). What an earlier attempt named stays
// too (the target may hold either) until one succeeds (depSettled) or a
// Delete of key does.
func (t *requests[Obj]) depApply(key string, deps []string) {
	g := t.deps
	cur := g.appliedDeps(key)
	switch {
	case len(deps) == 0 || len(cur) == len(deps) && containsAll(cur, deps):
		return // what it names is applied already: the common retry
	case len(cur) == 0 && len(deps) == 1:
		g.users[deps[0]]++ // the common first attempt
		g.setApplied(key, deps)
		return
	}
	union := slices.Clone(cur) // cur may be g.one
	for _, d := range deps {
		if !slices.Contains(union, d) {
			g.users[d]++
			union = append(union, d)
		}
	}
	g.setApplied(key, union)
}

// narrow records that key's Update of an object naming deps succeeded:
// the target holds it, and only deps are named by key from now on.
func (t *requests[Obj]) narrow(key string, deps []string, now time.Time) {
	g := t.deps
	cur := g.appliedDeps(key)
	if len(cur) == 0 || containsAll(deps, cur) {
		return // names nothing more than deps: the common success
	}
	var kept, gone []string
	for _, d := range cur {
		if slices.Contains(deps, d) {
			kept = append(kept, d)
		} else {
			gone = append(gone, d)
		}
	}
	g.setApplied(key, kept)
	for _, d := range gone {
		t.dropUser(d, now)
	}
}

// depDone records that key's Update succeeded: what waited for it is
// released, and a cycle it was on is over.
func (t *requests[Obj]) depDone(key string, now time.Time) {
	t.forgetCycle(key, now)
	t.release(key, now)
}

// depGone records that key's object is gone from the target (its Delete
// succeeded, a Prune removed it, or another replica owns it now).
func (t *requests[Obj]) depGone(key string, now time.Time) {
	g := t.deps
	gone := slices.Clone(g.appliedDeps(key)) // dropUser may use g.one
	g.setApplied(key, nil)
	for _, d := range gone {
		t.dropUser(d, now)
	}
}

// dropUser records that one applied object no longer names key; at none,
// key's Blocked delete is released.
func (t *requests[Obj]) dropUser(key string, now time.Time) {
	g := t.deps
	n, ok := g.users[key]
	switch {
	case !ok:
		return
	case n > 1:
		g.users[key] = n - 1
		return
	}
	delete(g.users, key)
	if r := g.delWaiting[key]; r != nil && r.state == stBlocked {
		t.regate(r, r.err, now)
	}
}

// appliedDeps returns what key's applied object names (nil: nothing). A
// single dependency comes back in g.one: good until the next call.
func (g *depGraph[Obj]) appliedDeps(key string) []string {
	if d, ok := g.named[key]; ok {
		g.one[0] = d
		return g.one[:]
	}
	return g.namedAll[key]
}

// setApplied records that key's applied object names deps (nil: nothing),
// which the graph keeps: the caller does not keep them.
func (g *depGraph[Obj]) setApplied(key string, deps []string) {
	_, one := g.named[key]
	_, all := g.namedAll[key]
	if one && len(deps) != 1 {
		delete(g.named, key)
	}
	if all && len(deps) < 2 {
		delete(g.namedAll, key)
	}
	if len(deps) > 0 {
		key = string([]byte(key)) // a copy: key may view an object's bytes, and an assignment keeps the key it is given
	}
	switch {
	case len(deps) == 1:
		g.named[key] = deps[0]
	case len(deps) > 1:
		g.namedAll[key] = deps
	}
}

// containsAll reports whether every key of sub is in set.
func containsAll(set, sub []string) bool {
	for _, k := range sub {
		if !slices.Contains(set, k) {
			return false
		}
	}
	return true
}

// seedAll records every object of all, the table as the run began, as
// applied: the best knowledge of what an earlier run left in the target.
// A pass of its own as the run opens, not as each object is read: one
// changed or deleted before the run first reads it is read at its newer
// version, and the earlier run left the one the table held at the start.
// Keys another replica owns are its.
func (t *requests[Obj]) seedAll(all iter.Seq2[Obj, statedb.Revision]) {
	if t.deps == nil {
		return
	}
	for obj := range all {
		if key := t.keyOf(obj); t.owns == nil || t.owns(key) {
			t.seed(key, obj)
		}
	}
}

// seedDeleted records obj, a key's delete read as the key is gained (owned
// here again), as applied: the owner may have applied it, and the Deletes
// of what it names wait for its own.
func (t *requests[Obj]) seedDeleted(key string, obj Obj) {
	if t.deps != nil && len(t.deps.appliedDeps(key)) == 0 {
		t.seed(key, obj)
	}
}

// seed records obj as applied on key: what the target may hold.
func (t *requests[Obj]) seed(key string, obj Obj) {
	if deps := t.deps.depsOf(obj); len(deps) > 0 {
		t.depApply(key, deps)
	}
}
