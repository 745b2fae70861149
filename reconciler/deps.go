package reconciler

import (
	"slices"
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
//   - applied: the dependencies of its object as last attempted (an
//     Update started in this run, whatever its result: the target may
//     hold it from then on; or, for what was in the table when the run
//     began, its object then; what earlier attempts named stays until
//     one succeeds), and how many applied objects name it (users: its
//     Delete waits while above 0);
//   - waiting: the Blocked updates that name it, each registered on
//     every dependency it names (entries go stale when the row moves
//     on: its gen changes; a release re-gates a row, which blocks again
//     on what is still missing);
//   - the Blocked delete of it, waiting for its users;
//   - cycles: the keys given up on for a cycle, with the cycle's members:
//     a change of any member tries the others again.
//
// Rules between them: a Blocked update is in the waiting list of every
// key it names; a Blocked delete is delWaiting's entry of its key and
// has users; users is the number of applied keys whose deps name the key.
// applied holds no cycle this run made (a request that would close one
// is given up on instead), but may hold one an earlier run left: the
// walks over it tolerate cycles.

// depGraph is the dependency part of a per-object loop's request table.
type depGraph[Obj any] struct {
	dependsOn func(Obj) []index.Key
	// get looks a key's object up in a snapshot; newTxn takes one. The
	// snapshot is kept until the loop lands a commit (fresh): a
	// dependency's Done is looked at in a snapshot that holds it.
	get    func(txn statedb.ReadTxn, key string) (Obj, bool)
	newTxn func() statedb.ReadTxn
	txn    statedb.ReadTxn
	// looked are the answers of the snapshot txn, by key ("": Done; else
	// why not): a dependency many keys name is looked up once a step.
	looked map[string]string

	// named and namedAll are what each applied key's object names (one
	// dependency, or several), users how many applied keys name each
	// key (depapplied.go); one is appliedDeps' answer for one.
	named    map[string]string
	namedAll map[string][]string
	users    map[string]int32
	one      [1]string
	waiting  map[string][]depWaiter[Obj]
	// staled counts the rows that left Blocked since waiting was last
	// swept (sweepWaiting).
	staled int
	// waitPeak is waiting's largest size since it was last made anew
	// (shrink.go).
	waitPeak   int
	delWaiting map[string]*request[Obj]
	cycles     map[string]depCycle
	// cyclic are the Blocked rows found on a cycle, whose Error is to be
	// written at the next commit.
	cyclic []depWaiter[Obj]
	// blockedAt lists the Blocked rows in the order they were blocked:
	// the oldest valid entry at its head is how long a key has waited.
	blockedAt []depWaiter[Obj]
	heaps     waitingHeaps[Obj]
	// lastHealth is what health last said of the keys blocked long.
	lastHealth string
	// parent and stack are the cycle walk's, kept between walks.
	parent map[string]string
	stack  []string
	// needs are Config.Requires (depneeds.go).
	needs needs[Obj]
}

// depWaiter is a Blocked row as it was when blocked.
type depWaiter[Obj any] struct {
	r     *request[Obj]
	gen   uint32
	since time.Time
}

func (w depWaiter[Obj]) valid() bool { return w.r.gen == w.gen && w.r.state == stBlocked }

// names reports whether w's row still waits for what it named: Blocked,
// or given up on for a cycle.
func (w depWaiter[Obj]) names() bool {
	return w.r.gen == w.gen && (w.r.state == stBlocked || w.r.state == stHeld && w.r.why == whyCycle)
}

func newDepGraph[Obj any](dependsOn func(Obj) []index.Key, required []need[Obj], get func(statedb.ReadTxn, string) (Obj, bool), newTxn func() statedb.ReadTxn) *depGraph[Obj] {
	g := &depGraph[Obj]{dependsOn: dependsOn, get: get, newTxn: newTxn, named: map[string]string{}, namedAll: map[string][]string{},
		users: map[string]int32{}, looked: map[string]string{},
		waiting: map[string][]depWaiter[Obj]{}, delWaiting: map[string]*request[Obj]{}, cycles: map[string]depCycle{},
		needs: needs[Obj]{list: required, waiting: map[needKey][]depWaiter[Obj]{}, looked: map[needKey]string{}}}
	g.heaps.init()
	return g
}

// depGraphOf returns the dependency graph r's Config asks for: nil
// without DependsOn and Requires.
func depGraphOf[Obj comparable](r *reconciler[Obj]) *depGraph[Obj] {
	if r.cfg.DependsOn == nil && len(r.cfg.Requires) == 0 {
		return nil
	}
	required := make([]need[Obj], len(r.cfg.Requires))
	for i, q := range r.cfg.Requires {
		required[i] = q.needOf()
	}
	return newDepGraph(r.cfg.DependsOn, required, func(txn statedb.ReadTxn, key string) (Obj, bool) {
		obj, _, found := r.getByKey(txn, key)
		return obj, found
	}, r.db.ReadTxn)
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
	if g != nil && g.txn != nil {
		g.txn = nil
		clear(g.looked)
		clear(g.needs.looked)
	}
}

// depsOf returns obj's dependencies as request table keys.
func (g *depGraph[Obj]) depsOf(obj Obj) []string {
	if g.dependsOn == nil {
		return nil // Config.Requires alone
	}
	keys := g.dependsOn(obj)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = string(k)
	}
	return out
}

// noDeps is the dependencies of an object that names none, asked.
var noDeps = []string{}

// depsOfRow returns the dependencies of r's object, asking DependsOn once
// per object read.
func (g *depGraph[Obj]) depsOfRow(r *request[Obj]) []string {
	if r.deps == nil {
		r.deps = g.depsOf(r.obj)
		if len(r.deps) == 0 {
			r.deps = noDeps
		}
	}
	return r.deps
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
		switch {
		case r.deleted:
			return false, "deleted"
		case r.err != "":
			return false, "Error: " + r.err
		case r.expect.Kind == StatusKindDone && !inFlight(r.state):
			// The table holds its Done, and its refresh has not started
			// (a key owned again is applied again as a refresh, its Done
			// kept): Done, as its dependents read it in the table.
			return true, ""
		}
		return false, stateWord(r.state)
	}
	g := t.deps
	if why, ok := g.looked[key]; ok {
		return why == "", why
	}
	why := ""
	if obj, found := g.lookup(key); !found {
		why = "not in the table"
	} else if st := t.statusOf(obj); st.Kind != StatusKindDone {
		why = st.Kind.String()
	}
	g.looked[key] = why
	return why == "", why
}

// inFlight reports whether a row in state s has an attempt out, or one
// queued behind an attempt on its key.
func inFlight(s reqState) bool { return s == stRunning || s == stBusy || s == stCommitting }

// stateWord names an outstanding row's state for a dependent's Explain.
func stateWord(s reqState) string {
	switch {
	case s == stBlocked:
		return "Blocked"
	case inFlight(s):
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
		return g.users[r.key] > 0
	}
	deps := g.depsOfRow(r)
	if slices.Contains(deps, r.key) {
		t.onCycle(r, []string{r.key}) // it depends on itself
		return true
	}
	if cycle := t.cycleThrough(r.key, deps); cycle != nil {
		t.onCycle(r, cycle)
		return true
	}
	return t.unmet(r)
}

// unmet reports whether r's update waits: for a dependency not Done, or
// for a row of another table it requires.
func (t *requests[Obj]) unmet(r *request[Obj]) bool {
	if _, _, ok := t.firstUnmet(r); ok {
		return true
	}
	_, _, ok := t.deps.needUnmet(r)
	return ok
}

// gateAgain is gate for an update judged before with the dependencies it
// names now (released, or taken to run): while they are all Done and it
// is on no cycle found, it skips the cycle walk. A cycle through it that
// closed since was closed by another key's change, whose gate found it
// and named its members in cycles: by an object that changed (judged as
// it is read, walking when anything names it), or, when what named it
// was Queued or running and so waited for nothing, by that one's own
// gate as it is taken to run, which finds the changed key not Done and
// walks. An Update never makes an edge its object did not name when read.
// Without it, a long chain of Done dependencies is walked at every
// release and every dispatch: deps/one-edge's prev made quadratic.
func (t *requests[Obj]) gateAgain(r *request[Obj]) bool {
	if !r.deleted && !t.deps.isCyclic(r.key) && !t.unmet(r) {
		return false
	}
	return t.gate(r)
}

// firstUnmet returns the first dependency of a Blocked update that is not
// Done, and why.
func (t *requests[Obj]) firstUnmet(r *request[Obj]) (string, string, bool) {
	for _, d := range t.deps.depsOfRow(r) {
		if done, why := t.depState(d); !done {
			return d, why, true
		}
	}
	return "", "", false
}
