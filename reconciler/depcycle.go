package reconciler

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Dependency cycles. A key on a cycle is never attempted: it is given up
// on with an error naming the cycle (the Error is written at the next
// commit), until a change of any key of a cycle judges them all again.
// Every update is checked as it is judged (gate): cycleThrough walks
// from its dependencies back to it, when something could close a cycle
// through it, at a cost that follows its dependencies, not the graph.

// cycleThrough returns a cycle that key's update, naming deps, closes
// (key first), or nil. The edges are the desired ones: an outstanding
// update's dependencies as its object names them, and for a key with
// none outstanding, what was applied. It walks only when something could
// close a cycle through key: an update waiting for good (Blocked, or
// given up on for a cycle) names key, a dependency is given up on for a
// cycle, an applied object names key, or key was found on a cycle (whose
// member naming it may be having its cycle Error written). A chain or a
// forest read in order walks from each key down its dependencies, not the
// graph.
func (t *requests[Obj]) cycleThrough(key string, deps []string) []string {
	if t.deps.users[key] == 0 && !t.hasWaiters(key) &&
		!slices.ContainsFunc(deps, t.cycleHeld) && !t.deps.isCyclic(key) {
		return nil
	}
	return t.walk(key, deps, t.edges)
}

// edges returns what key depends on, for the cycle walk.
func (t *requests[Obj]) edges(key string) ([]string, bool) {
	if r := t.rows[key]; r != nil && r.detail != nil && r.state != stRefreshDue {
		if r.deleted {
			return nil, false
		}
		return t.deps.depsOfRow(r), true
	}
	if deps := t.deps.appliedDeps(key); len(deps) > 0 {
		return deps, true
	}
	return nil, false
}

// cycleHeld reports whether key's update is given up on for a cycle: it
// waits for good, as a Blocked one does.
func (t *requests[Obj]) cycleHeld(key string) bool {
	r := t.rows[key]
	return r != nil && r.state == stHeld && r.why == whyCycle && !r.deleted
}

// hasWaiters reports whether an update waiting for good names key.
func (t *requests[Obj]) hasWaiters(key string) bool {
	for _, w := range t.deps.waiting[key] {
		if w.names() {
			return true
		}
	}
	return false
}

// walk searches, depth first from deps, for a path back to key along the
// edges next gives (false: none from that key), and returns it as a cycle
// starting at key, or nil. Each key is visited once.
func (t *requests[Obj]) walk(key string, deps []string, next func(string) ([]string, bool)) []string {
	g := t.deps
	if g.parent == nil {
		g.parent = map[string]string{}
	}
	parent, stack := g.parent, g.stack[:0]
	defer func() {
		// Kept for the next walk, unless a large one grew them: clearing
		// a map costs its size.
		if len(parent) > 256 {
			g.parent, g.stack = nil, nil
		} else {
			clear(parent)
			clear(stack[:cap(stack)])
			g.stack = stack[:0]
		}
	}()
	for _, d := range deps {
		if _, seen := parent[d]; !seen {
			parent[d] = key
			stack = append(stack, d)
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == key {
			return pathBack(parent, key)
		}
		out, ok := next(n)
		if !ok {
			continue
		}
		for _, d := range out {
			if _, seen := parent[d]; !seen {
				parent[d] = n
				stack = append(stack, d)
			}
		}
	}
	return nil
}

// pathBack returns the cycle through key that parent records, key first,
// in the direction of the dependencies.
func pathBack(parent map[string]string, key string) []string {
	var rev []string
	for n := parent[key]; n != key; n = parent[n] {
		rev = append(rev, n)
	}
	cycle := []string{key}
	for i := len(rev) - 1; i >= 0; i-- {
		cycle = append(cycle, rev[i])
	}
	return cycle
}

// onCycle records that r's update closes cycle: each member is given up
// on (those Blocked now, and r once it is), until one of them changes; so
// is every other key the cycle shows to be on one (sccCycles).
func (t *requests[Obj]) onCycle(r *request[Obj], cycle []string) {
	cycle[0] = string([]byte(cycle[0])) // r's key: it may view its object's bytes
	found := depCycle{keys: cycle, n: len(cycle)}
	for _, k := range cycle {
		t.markCycle(r, k, found)
	}
	for _, m := range t.sccCycles(r.key, cycle) {
		t.markCycle(r, m.key, m.cycle)
	}
	t.deps.cyclic = append(t.deps.cyclic, depWaiter[Obj]{r: r}) // gen is set as it blocks
}

// markCycle records that key is on cycle, found by r's update: a Blocked
// update of key is given up on at the next commit.
func (t *requests[Obj]) markCycle(r *request[Obj], key string, cycle depCycle) {
	g := t.deps
	g.cycles[string([]byte(key))] = cycle
	if m := t.rows[key]; m != nil && m != r && m.state == stBlocked && !m.deleted {
		g.cyclic = append(g.cyclic, depWaiter[Obj]{r: m, gen: m.gen})
	}
}

// takeCyclic returns the Blocked updates to be given up on for a cycle,
// with the cycle each closes.
func (t *requests[Obj]) takeCyclic() (rows []*request[Obj], cycles []depCycle) {
	g := t.deps
	for _, w := range g.cyclic {
		r := w.r
		if cycle, ok := g.cycles[r.key]; r.state == stBlocked && !r.deleted && ok {
			rows, cycles = append(rows, r), append(cycles, cycle)
		}
	}
	clear(g.cyclic)
	g.cyclic = g.cyclic[:0]
	return rows, cycles
}

// forgetCycle ends the cycles key was on, if any, when key changes or is
// applied: every key given up on for a cycle is judged again (a key may
// be on several cycles, and one change can break some and not others;
// those that still hold are found again as their keys block). Cycles are
// errors, and few: a change of a key on one judges them all.
func (t *requests[Obj]) forgetCycle(key string, now time.Time) {
	g := t.deps
	if !g.isCyclic(key) {
		return
	}
	keys := make([]string, 0, len(g.cycles))
	for k := range g.cycles {
		keys = append(keys, k)
	}
	clear(g.cycles)
	slices.Sort(keys) // the same order every run: a seed replays
	for _, k := range keys {
		if m := t.rows[k]; m != nil && m.detail != nil && !m.deleted &&
			(m.state == stHeld && m.why == whyCycle || m.state == stBlocked) {
			t.regate(m, m.err, now)
		}
	}
}

// isCyclic reports whether key is on a cycle found.
func (g *depGraph[Obj]) isCyclic(key string) bool {
	_, ok := g.cycles[key]
	return ok
}

// cyclicDue reports whether updates wait to be given up on for a cycle.
func (t *requests[Obj]) cyclicDue() bool { return t.deps != nil && len(t.deps.cyclic) > 0 }

// failCycles judges into job the Blocked updates found on a cycle: each
// fails with the cycle's error, never attempted, and is given up on once
// its Error is written.
func (c *committer[Obj]) failCycles(job *commitJob[Obj], now time.Time) {
	if !c.t.cyclicDue() {
		return
	}
	rows, cycles := c.t.takeCyclic()
	for i, r := range rows {
		c.t.lastAttempt++
		r.attempt = c.t.lastAttempt
		o := outcome[Obj]{r: r, op: OpUpdate, attempt: r.attempt, err: cycleError(cycles[i]), rev: r.rev}
		c.judgeInto(job, &o, now)
	}
}

// holdCycle gives r up for the cycle its Error names, now written: it
// waits for good, named in its dependencies' waiting lists (a longer
// cycle through it is found from them), and what waits for it, and the
// Blocked keys it depends on, are judged again (they may be on such a
// cycle). A cycle broken while its Error was
// being written leaves r to be judged again instead.
func (t *requests[Obj]) holdCycle(r *request[Obj], msg string, now time.Time) {
	if !t.deps.isCyclic(r.key) {
		t.regate(r, msg, now)
		return
	}
	t.hold(r, whyCycle, msg, time.Time{}, now)
	t.register(depWaiter[Obj]{r: r, gen: r.gen})
	t.release(r.key, now)
	// Another cycle may run through r and a key it depends on, Blocked
	// since before r closed it: that key is judged again too (and so on
	// along the cycle, as each is given up on).
	for _, d := range t.deps.depsOfRow(r) {
		if m := t.rows[d]; m != nil && m.state == stBlocked && !m.deleted {
			t.regate(m, m.err, now)
		}
	}
}

// cycleError is the error of a key given up on for a dependency cycle.
func cycleError(c depCycle) error {
	names := make([]string, 0, len(c.keys)+2)
	for i, k := range c.keys {
		if i == cycleShown && c.n > cycleShown+1 {
			names = append(names, fmt.Sprintf("... (%d more)", c.n-cycleShown))
			break
		}
		names = append(names, printableKey(k))
	}
	names = append(names, printableKey(c.keys[0]))
	return fmt.Errorf("%w: %s", ErrDependencyCycle, strings.Join(names, " -> "))
}
