package reconciler

import (
	"fmt"
	"strings"
	"time"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
)

// Dependencies between objects (Config.DependsOn), as a part of the
// request table: a request whose dependencies are not all Done is Blocked
// (a state, not a retry: no attempt, no backoff, no failure), and is
// released in the step that commits its last dependency's Done. A Delete
// waits for the objects that depended on its object, as last reconciled,
// to be deleted from the target. A key on a cycle is given up on with an
// error naming the cycle. The graph knows, per key:
//
//   - applied: the dependencies of its object as last reconciled (a
//     successful Update in this run, or, for what was in the table when
//     the run began, its object then), its rank (1 + the highest rank of
//     those, so that every applied edge goes down in rank), and how many
//     applied objects name it (users: its Delete waits while above 0);
//   - waiting: the Blocked updates waiting for it, each registered on the
//     first dependency it waits for (entries go stale when the row moves
//     on: its gen changes);
//   - the Blocked delete of it, waiting for its users;
//   - cycles: the keys given up on for a cycle, with the cycle's members:
//     a change of any member tries the others again.
//
// Rules between them: a Blocked update is in the waiting list of one key
// it waits for; a Blocked delete is delWaiting's entry of its key and has
// users; applied never holds a cycle (a request that would close one is
// given up on instead), which is what makes ranks well defined.

// depGraph is the dependency part of a per-object loop's request table.
type depGraph[Obj any] struct {
	dependsOn func(Obj) []index.Key
	// get looks a key's object up in a snapshot; newTxn takes one. The
	// snapshot is kept until the loop lands a commit (fresh): a
	// dependency's Done is looked at in a snapshot that holds it.
	get    func(txn statedb.ReadTxn, key string) (Obj, bool)
	newTxn func() statedb.ReadTxn
	txn    statedb.ReadTxn

	applied    map[string]*appliedKey
	waiting    map[string][]depWaiter[Obj]
	delWaiting map[string]*request[Obj]
	cycles     map[string][]string
	// cyclic are the Blocked rows found on a cycle, whose Error is to be
	// written at the next commit.
	cyclic []depWaiter[Obj]
	// blockedAt lists the Blocked rows in the order they were blocked:
	// the oldest valid entry at its head is how long a key has waited.
	blockedAt []depWaiter[Obj]
	ranked    bool // the keys seeded by the first read have their ranks
	heaps     blockedHeaps[Obj]
	// lastHealth is what health last said of the keys blocked long.
	lastHealth string
}

// appliedKey is what the graph keeps of a key whose object is applied, or
// is named by one that is.
type appliedKey struct {
	deps  []string // its dependencies as last reconciled
	rank  int32
	users int32 // applied objects that name it
}

// depWaiter is a Blocked row as it was when blocked.
type depWaiter[Obj any] struct {
	r     *request[Obj]
	gen   uint32
	since time.Time
}

func (w depWaiter[Obj]) valid() bool { return w.r.gen == w.gen && w.r.state == stBlocked }

func newDepGraph[Obj any](dependsOn func(Obj) []index.Key, get func(statedb.ReadTxn, string) (Obj, bool), newTxn func() statedb.ReadTxn) *depGraph[Obj] {
	g := &depGraph[Obj]{dependsOn: dependsOn, get: get, newTxn: newTxn, applied: map[string]*appliedKey{},
		waiting: map[string][]depWaiter[Obj]{}, delWaiting: map[string]*request[Obj]{}, cycles: map[string][]string{}}
	g.heaps.init()
	return g
}

// lookup returns the table's object with key.
func (g *depGraph[Obj]) lookup(key string) (Obj, bool) {
	if g.txn == nil {
		g.txn = g.newTxn()
	}
	return g.get(g.txn, key)
}

// fresh drops the snapshot lookups use: the table changed (a commit landed,
// a step began).
func (g *depGraph[Obj]) fresh() {
	if g != nil {
		g.txn = nil
	}
}

// depsOf returns obj's dependencies as request table keys.
func (g *depGraph[Obj]) depsOf(obj Obj) []string {
	keys := g.dependsOn(obj)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = string(k)
	}
	return out
}

// depState says whether key is Done for this reconciler, and if not, why.
func (t *requests[Obj]) depState(key string) (bool, string) {
	r := t.rows[key]
	switch {
	case r != nil && r.state == stNotOwned, t.owns != nil && !t.owns(key):
		return false, "owned by another replica: its Done is not seen here"
	case r != nil && r.state == stUnset:
		return false, "Unset"
	case r != nil && r.detail != nil && r.state != stRefreshDue:
		if r.deleted {
			return false, "deleted"
		}
		if r.err != "" {
			return false, "Error: " + r.err
		}
		return false, stateWord(r.state)
	}
	obj, found := t.deps.lookup(key)
	if !found {
		return false, "not in the table"
	}
	if st := t.statusOf(obj); st.Kind != StatusKindDone {
		return false, st.Kind.String()
	}
	return true, ""
}

// stateWord names an outstanding row's state for a dependent's Explain.
func stateWord(s reqState) string {
	switch s {
	case stBlocked:
		return "Blocked"
	case stRunning, stBusy, stCommitting:
		return "in flight"
	}
	return "Pending"
}

// gate reports whether r must wait: an update for a dependency not Done,
// a delete for objects that depend on its object. An update on a cycle is
// marked to be given up on (it waits Blocked until then).
func (t *requests[Obj]) gate(r *request[Obj]) bool {
	g := t.deps
	if r.deleted {
		a := g.applied[r.key]
		return a != nil && a.users > 0
	}
	deps := g.depsOf(r.obj)
	for _, d := range deps {
		if done, _ := t.depState(d); !done {
			if cycle := t.blockedCycle(r.key, deps); cycle != nil {
				t.onCycle(r, cycle)
			}
			return true
		}
	}
	if cycle := t.appliedCycle(r.key, deps); cycle != nil {
		t.onCycle(r, cycle)
		return true
	}
	return false
}

// firstUnmet returns the first dependency of a Blocked update that is not
// Done, and why.
func (t *requests[Obj]) firstUnmet(r *request[Obj]) (string, string, bool) {
	for _, d := range t.deps.depsOf(r.obj) {
		if done, why := t.depState(d); !done {
			return d, why, true
		}
	}
	return "", "", false
}

// block registers r, just made Blocked at now.
func (t *requests[Obj]) block(r *request[Obj], now time.Time) {
	g := t.deps
	w := depWaiter[Obj]{r: r, gen: r.gen, since: now}
	g.blockedAt = append(g.blockedAt, w)
	g.heaps.push(r)
	if r.deleted {
		g.delWaiting[r.key] = r
		return
	}
	if d, _, ok := t.firstUnmet(r); ok {
		list := append(g.waiting[d], w)
		if n := len(list); n >= 64 && n&(n-1) == 0 { // at each doubling: drop what went stale
			list = compactWaiters(list)
		}
		g.waiting[d] = list
	}
}

// unblock forgets r, leaving Blocked (its list entries go stale).
func (t *requests[Obj]) unblock(r *request[Obj]) {
	t.deps.heaps.remove(r)
	if r.deleted && t.deps.delWaiting[r.key] == r {
		delete(t.deps.delWaiting, r.key)
	}
}

func compactWaiters[Obj any](list []depWaiter[Obj]) []depWaiter[Obj] {
	kept := list[:0]
	for _, w := range list {
		if w.valid() {
			kept = append(kept, w)
		}
	}
	clear(list[len(kept):])
	return kept
}

// release re-gates the updates waiting for key, now Done or gone: each is
// Queued, or Blocked on its next unmet dependency.
func (t *requests[Obj]) release(key string, now time.Time) {
	list := t.deps.waiting[key]
	if list == nil {
		return
	}
	delete(t.deps.waiting, key)
	for _, w := range list {
		if w.valid() {
			t.move(w.r, t.queuedState(w.r), whyNone, w.r.err, time.Time{}, now)
		}
	}
}

// depSettled records that key's operation succeeded: its Update of obj,
// or its Delete.
func (t *requests[Obj]) depSettled(key string, obj Obj, deleted bool, now time.Time) {
	if deleted {
		t.depGone(key, now)
		return
	}
	t.depDone(key, obj, now)
}

// depDone records that key's Update of obj succeeded: its dependencies
// are applied as obj names them, and what waited for it is released.
func (t *requests[Obj]) depDone(key string, obj Obj, now time.Time) {
	g := t.deps
	deps := g.depsOf(obj)
	a := g.node(key)
	var rank int32
	for _, d := range deps {
		n := g.node(d)
		n.users++
		rank = max(rank, n.rank+1)
	}
	for _, d := range a.deps {
		t.dropUser(d, now)
	}
	a.deps, a.rank = deps, rank
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
		t.move(r, t.queuedState(r), whyNone, r.err, time.Time{}, now)
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
	g := t.deps
	deps := g.depsOf(obj)
	if len(deps) == 0 {
		return
	}
	a := g.node(key)
	for _, d := range deps {
		g.node(d).users++
	}
	a.deps = deps
}

// rankSeeds gives the keys seeded ranks, once the first read is done
// (their dependencies may come after them in revision order). A cycle
// left by an earlier run breaks at the key it is met at.
func (g *depGraph[Obj]) rankSeeds() {
	if g.ranked {
		return
	}
	g.ranked = true
	const visiting = -1
	var rank func(key string, a *appliedKey) int32
	rank = func(key string, a *appliedKey) int32 {
		if a.rank != 0 || len(a.deps) == 0 {
			return max(a.rank, 0)
		}
		a.rank = visiting
		var r int32
		for _, d := range a.deps {
			if n := g.applied[d]; n != nil {
				r = max(r, rank(d, n)+1)
			} else {
				r = max(r, 1)
			}
		}
		a.rank = r
		return r
	}
	for key, a := range g.applied {
		rank(key, a)
	}
}

// cycleError is the error of a key given up on for a dependency cycle.
func cycleError(cycle []string) error {
	names := make([]string, 0, min(len(cycle), 6)+1)
	for i, k := range cycle {
		if i == 5 && len(cycle) > 6 {
			names = append(names, fmt.Sprintf("... (%d more)", len(cycle)-5))
			break
		}
		names = append(names, printableKey(k))
	}
	names = append(names, printableKey(cycle[0]))
	return fmt.Errorf("%w: %s", ErrDependencyCycle, strings.Join(names, " -> "))
}
