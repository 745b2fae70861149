package reconciler

import "time"

// Dependency cycles. A key on a cycle is never attempted: it is given up
// on with an error naming the cycle (the Error is written at the next
// commit), until a change of any key of the cycle tries the others again.
// Two checks find every cycle a request could close, each at a cost that
// follows the request, not the graph:
//
//   - blockedCycle, when a request blocks and other Blocked requests wait
//     for its key: a walk of the Blocked requests' dependencies, back to
//     it. Requests that wait for nobody close no cycle of Blocked ones
//     (a chain read in order walks nothing).
//   - appliedCycle, when a request's dependencies are all Done and its key
//     was applied before: a walk of the applied edges from its
//     dependencies back to it, over keys of a higher rank only (every
//     applied edge goes down in rank). A key never applied is named by no
//     applied edge, and closes no applied cycle: nothing is walked.

// blockedCycle returns a cycle of Blocked updates that key, whose update
// is about to block on deps, would close (key first), or nil.
func (t *requests[Obj]) blockedCycle(key string, deps []string) []string {
	if !t.hasWaiters(key) {
		return nil
	}
	return t.walk(key, deps, func(n string) ([]string, bool) {
		r := t.rows[n]
		if r == nil || r.state != stBlocked || r.deleted {
			return nil, false
		}
		return t.deps.depsOf(r.obj), true
	})
}

// appliedCycle returns a cycle that key, whose update would run with
// deps (all Done), would close in the applied graph (key first), or nil.
func (t *requests[Obj]) appliedCycle(key string, deps []string) []string {
	self := t.deps.applied[key]
	if self == nil {
		return nil
	}
	return t.walk(key, deps, func(n string) ([]string, bool) {
		a := t.deps.applied[n]
		if a == nil || a.rank <= self.rank {
			return nil, false
		}
		return a.deps, true
	})
}

// hasWaiters reports whether a Blocked update waits for key.
func (t *requests[Obj]) hasWaiters(key string) bool {
	for _, w := range t.deps.waiting[key] {
		if w.valid() {
			return true
		}
	}
	return false
}

// walk searches, depth first from deps, for a path back to key along the
// edges next gives (false: none from that key), and returns it as a cycle
// starting at key, or nil. Each key is visited once.
func (t *requests[Obj]) walk(key string, deps []string, next func(string) ([]string, bool)) []string {
	parent := map[string]string{}
	stack := make([]string, 0, len(deps))
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
// on (those Blocked now, and r once it is), until one of them changes.
func (t *requests[Obj]) onCycle(r *request[Obj], cycle []string) {
	g := t.deps
	for _, k := range cycle {
		g.cycles[string([]byte(k))] = cycle
		if m := t.rows[k]; m != nil && m != r && m.state == stBlocked && !m.deleted {
			g.cyclic = append(g.cyclic, depWaiter[Obj]{r: m, gen: m.gen})
		}
	}
	g.cyclic = append(g.cyclic, depWaiter[Obj]{r: r}) // gen is set as it blocks
}

// takeCyclic returns the Blocked updates to be given up on for a cycle,
// with the cycle each closes.
func (t *requests[Obj]) takeCyclic() (rows []*request[Obj], cycles [][]string) {
	g := t.deps
	for _, w := range g.cyclic {
		r := w.r
		if cycle := g.cycles[r.key]; r.state == stBlocked && !r.deleted && cycle != nil {
			rows, cycles = append(rows, r), append(cycles, cycle)
		}
	}
	clear(g.cyclic)
	g.cyclic = g.cyclic[:0]
	return rows, cycles
}

// forgetCycle ends the cycle key was on, if any, when key changes or is
// applied: every other member given up on for it is tried again.
func (t *requests[Obj]) forgetCycle(key string, now time.Time) {
	g := t.deps
	cycle := g.cycles[key]
	if cycle == nil {
		return
	}
	for _, k := range cycle {
		delete(g.cycles, k)
	}
	for _, k := range cycle {
		if m := t.rows[k]; k != key && m != nil && m.state == stHeld && m.why == whyCycle {
			t.move(m, t.queuedState(m), whyNone, m.err, time.Time{}, now)
		}
	}
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
