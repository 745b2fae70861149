package reconciler

import (
	"slices"
	"time"
)

// What the target may hold, as the dependency graph knows it (applied):
// an Update counts from its start (depApply), what earlier attempts
// named stays until one succeeds (narrow), and a successful Delete, or
// another replica taking the key, ends it (depGone). A key's Delete waits
// while an applied object names it (users); the last one to stop naming
// it releases that Delete (dropUser). What was in the table as the run
// began counts as applied (seed).

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
	a := g.node(key)
	for _, d := range deps {
		if !slices.Contains(a.deps, d) {
			g.node(d).users++
			a.deps = append(a.deps, d)
		}
	}
}

// narrow records that key's Update of an object naming deps succeeded:
// the target holds it, and only deps are named by key from now on.
func (t *requests[Obj]) narrow(key string, deps []string, now time.Time) {
	a := t.deps.applied[key]
	if a == nil {
		return
	}
	var gone []string
	kept := a.deps[:0]
	for _, d := range a.deps {
		if slices.Contains(deps, d) {
			kept = append(kept, d)
		} else {
			gone = append(gone, d)
		}
	}
	clear(a.deps[len(kept):])
	a.deps = kept
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
	a := g.applied[key]
	if a == nil {
		return
	}
	for _, d := range a.deps {
		t.dropUser(d, now)
	}
	a.deps = nil
	if a.users == 0 {
		delete(g.applied, key)
	}
}

// dropUser records that one applied object no longer names key; at none,
// key's Blocked delete is released.
func (t *requests[Obj]) dropUser(key string, now time.Time) {
	g := t.deps
	a := g.applied[key]
	if a == nil {
		return
	}
	if a.users--; a.users > 0 {
		return
	}
	if len(a.deps) == 0 {
		delete(g.applied, key)
	}
	if r := g.delWaiting[key]; r != nil && r.state == stBlocked {
		t.regate(r, r.err, now)
	}
}

func (g *depGraph[Obj]) node(key string) *appliedKey {
	a := g.applied[key]
	if a == nil {
		a = &appliedKey{}
		g.applied[string([]byte(key))] = a // a copy: key may view an object's bytes
	}
	return a
}

// seed records obj, in the table when the run began, as applied: it is
// the best knowledge of what an earlier run left in the target.
func (t *requests[Obj]) seed(key string, obj Obj) {
	if deps := t.deps.depsOf(obj); len(deps) > 0 {
		t.depApply(key, deps)
	}
}
