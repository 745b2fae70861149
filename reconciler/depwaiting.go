package reconciler

import (
	"errors"
	"time"
)

// The Blocked state's lists (deps.go's graph): a row that must wait is
// registered in the waiting list of every key it names (block, register),
// leaves them stale when it moves on (unblock; swept once enough went
// stale), and is judged again when a key it waits for is Done or gone
// (release): Queued, or Blocked on what it still misses.

// block registers r, just made Blocked at now.
func (t *requests[Obj]) block(r *request[Obj], now time.Time) {
	g := t.deps
	w := depWaiter[Obj]{r: r, gen: r.gen, since: now}
	g.blockedAt = append(g.blockedAt, w)
	if n := len(g.blockedAt); n >= 64 && n&(n-1) == 0 {
		// At each doubling, drop what went stale: a key blocked for good
		// at the head keeps oldestBlocked from trimming the rest.
		g.blockedAt = compactWaiters(g.blockedAt)
	}
	g.heaps.push(r)
	if o := t.obs; o != nil && o.wants.has(EventBlocked) {
		o.blocked(r, errors.New(t.blockedWhy(r.key))) // the reason as of now: observers may keep it
	}
	if r.deleted {
		g.delWaiting[r.key] = r
		return
	}
	t.register(w)
	g.registerNeeds(w)
}

// regate judges r, Blocked or given up on for a cycle, again: Queued, or
// Blocked on what is still missing. Observers are told of a release.
func (t *requests[Obj]) regate(r *request[Obj], errMsg string, now time.Time) {
	t.rejudge(r, t.queuedState(r), errMsg, now)
}

// rejudge moves r, Blocked or given up on for a cycle, to s, as its gate
// said. Observers are told of a release.
func (t *requests[Obj]) rejudge(r *request[Obj], s reqState, errMsg string, now time.Time) {
	if r.state == stBlocked && s != stBlocked {
		t.obs.released(r) // before it is ready
	}
	t.move(r, s, whyNone, errMsg, time.Time{}, now)
}

// register puts w in the waiting list of each of its dependencies, Done
// or not: a dependency Done now may change, and a cycle is found from the
// waiting list of whichever of its keys is judged last (cycleThrough).
func (t *requests[Obj]) register(w depWaiter[Obj]) {
	g := t.deps
	for _, d := range g.depsOfRow(w.r) {
		list := append(g.waiting[d], w)
		if n := len(list); n >= 64 && n&(n-1) == 0 { // at each doubling: drop what went stale
			list = compactWaiters(list)
		}
		g.waiting[d] = list
	}
	g.waitPeak = max(g.waitPeak, len(g.waiting))
}

// unblock forgets r, leaving Blocked (its list entries go stale).
func (t *requests[Obj]) unblock(r *request[Obj]) {
	g := t.deps
	g.heaps.remove(r)
	switch {
	case r.deleted:
		if g.delWaiting[r.key] == r {
			delete(g.delWaiting, r.key)
		}
	default:
		// Its entries in the lists of what it names go stale; those of a
		// key that never comes would stay for ever (sweepWaiting).
		if g.staled++; g.staled >= 1024 && 2*g.staled >= len(g.waiting)+len(g.needs.waiting) {
			g.sweepWaiting()
		}
	}
}

// sweepWaiting drops the stale entries of every waiting list, and the
// lists left empty: once the rows that left Blocked since the last sweep
// number half the lists (and at least 1024), so that its cost, which
// follows the lists, is paid once per as many unblocks. Without it, the
// entry of a row Blocked on a key that never comes, changed or deleted
// since, stays for ever.
func (g *depGraph[Obj]) sweepWaiting() {
	sweepLists(g.waiting)
	sweepLists(g.needs.waiting)
	g.staled = 0
}

// sweepLists drops the stale entries of each list, and the lists left
// empty.
func sweepLists[K comparable, Obj any](lists map[K][]depWaiter[Obj]) {
	for k, list := range lists {
		if list = compactWaiters(list); len(list) == 0 {
			delete(lists, k)
		} else {
			lists[k] = list
		}
	}
}

func compactWaiters[Obj any](list []depWaiter[Obj]) []depWaiter[Obj] {
	kept := list[:0]
	for _, w := range list {
		if w.names() {
			kept = append(kept, w)
		}
	}
	clear(list[len(kept):])
	return kept
}

// release re-gates the updates waiting for key, now Done or gone: each is
// Queued, or Blocked on its next unmet dependency. Those given up on for
// a cycle stay in key's list: they still name it (a cycle through key is
// found from there).
func (t *requests[Obj]) release(key string, now time.Time) {
	g := t.deps
	list := g.waiting[key]
	if list == nil {
		return
	}
	delete(g.waiting, key)
	var held []depWaiter[Obj]
	for _, w := range list {
		if r := w.r; w.valid() {
			t.rejudge(r, t.stateIf(r, t.gateAgain(r)), r.err, now)
		} else if w.names() {
			held = append(held, w)
		}
	}
	if held != nil {
		g.waiting[key] = append(g.waiting[key], held...)
	}
}
