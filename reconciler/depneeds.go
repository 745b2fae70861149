package reconciler

import (
	"fmt"
	"time"
)

// Requirements on other tables' rows (Config.Requires, requires.go) in
// the request table: the dependency graph's gate asks them after the
// object's own dependencies, a Blocked update waits in the list of each
// required row missing when it blocked (needWaiting), and each step
// first reads the required tables' changes (pullNeeds): a row inserted or
// changed re-gates what waits for it, in that step. The reads are made
// in the snapshot the gates then use (and newer ones), so a row a gate
// found missing comes through a later read: no release is lost. Other
// tables make no cycle, and a Delete never waits for them.

// needKey is a required row: the requirement's index in Config.Requires
// and the row's primary key.
type needKey struct {
	i   int
	key string
}

// needs are a depGraph's requirements and this run's readers of their
// tables.
type needs[Obj any] struct {
	list  []need[Obj]
	feeds []needFeed
	// watch are the feeds' channels as last read; anyOf wakes the loop
	// when one of several closes.
	watch []<-chan struct{}
	anyOf *watchAny
	// waiting are the Blocked updates that a missing row holds; looked
	// the rows' states in the graph's snapshot ("": there and ready).
	waiting map[needKey][]depWaiter[Obj]
	looked  map[needKey]string
}

// noNeeds is the requirements of an object that needs no row, asked.
var noNeeds = []needKey{}

// needsOfRow returns the rows r's object requires, asking each
// requirement once per object read.
func (g *depGraph[Obj]) needsOfRow(r *request[Obj]) []needKey {
	if r.needs == nil {
		r.needs = noNeeds
		for i, n := range g.needs.list {
			for _, k := range n.keysOf(r.obj) {
				r.needs = append(r.needs, needKey{i, string(k)})
			}
		}
	}
	return r.needs
}

// needState says whether the required row nk is there and ready in the
// graph's snapshot, and if not, why.
func (g *depGraph[Obj]) needState(nk needKey) (bool, string) {
	if why, ok := g.needs.looked[nk]; ok {
		return why == "", why
	}
	if g.txn == nil {
		g.txn = g.newTxn()
	}
	met, why := g.needs.list[nk.i].state(g.txn, nk.key)
	g.needs.looked[nk] = why
	return met, why
}

// needUnmet returns the first row r's update requires that is missing or
// not ready, and why.
func (g *depGraph[Obj]) needUnmet(r *request[Obj]) (needKey, string, bool) {
	if len(g.needs.list) == 0 {
		return needKey{}, "", false
	}
	for _, nk := range g.needsOfRow(r) {
		if met, why := g.needState(nk); !met {
			return nk, why, true
		}
	}
	return needKey{}, "", false
}

// describeNeed names a required row for Explain and health.
func (g *depGraph[Obj]) describeNeed(nk needKey) string {
	return fmt.Sprintf("%s row %s", g.needs.list[nk.i].name(), printableKey(nk.key))
}

// registerNeeds puts w, just Blocked, in the list of each row it requires
// that is missing or not ready now.
func (g *depGraph[Obj]) registerNeeds(w depWaiter[Obj]) {
	if len(g.needs.list) == 0 {
		return
	}
	for _, nk := range g.needsOfRow(w.r) {
		if met, _ := g.needState(nk); met {
			continue
		}
		list := append(g.needs.waiting[nk], w)
		if n := len(list); n >= 64 && n&(n-1) == 0 { // at each doubling: drop what went stale
			list = compactWaiters(list)
		}
		g.needs.waiting[nk] = list
	}
}

// openNeeds starts reading the required tables' changes for this run.
func (g *depGraph[Obj]) openNeeds(open func(need[Obj]) (needFeed, error)) error {
	if g == nil {
		return nil
	}
	for _, n := range g.needs.list {
		f, err := open(n)
		if err != nil {
			g.closeNeeds()
			return err
		}
		g.needs.feeds = append(g.needs.feeds, f)
	}
	g.needs.watch = make([]<-chan struct{}, len(g.needs.feeds))
	if len(g.needs.feeds) > 1 {
		g.needs.anyOf = newWatchAny()
	}
	return nil
}

// closeNeeds stops reading the required tables.
func (g *depGraph[Obj]) closeNeeds() {
	if g == nil {
		return
	}
	for _, f := range g.needs.feeds {
		f.close()
	}
	g.needs.feeds = nil
	if g.needs.anyOf != nil {
		g.needs.anyOf.stop()
		g.needs.anyOf = nil
	}
}

// pullNeeds reads what changed in the required tables, in a snapshot the
// step's gates then use, and re-gates the updates waiting for a row that
// came or changed.
func (t *requests[Obj]) pullNeeds(now time.Time) {
	g := t.deps
	if g == nil || len(g.needs.feeds) == 0 {
		return
	}
	if g.txn == nil {
		g.txn = g.newTxn()
	}
	for i, f := range g.needs.feeds {
		g.needs.watch[i] = f.read(g.txn, func(key string) { t.releaseNeed(needKey{i, key}, now) })
	}
	if g.needs.anyOf != nil {
		g.needs.anyOf.arm(g.needs.watch)
	}
}

// releaseNeed re-gates the updates waiting for the required row nk: each
// is Queued, or Blocked on what it still misses.
func (t *requests[Obj]) releaseNeed(nk needKey, now time.Time) {
	g := t.deps
	list, ok := g.needs.waiting[nk]
	if !ok {
		return
	}
	delete(g.needs.waiting, nk)
	delete(g.needs.looked, nk) // it changed: looked again
	for _, w := range list {
		if r := w.r; w.valid() {
			t.rejudge(r, t.stateIf(r, t.gateAgain(r)), r.err, now)
		}
	}
}

// needsWake returns the channel that closes when a required table has
// changes not read yet (nil: no requirement).
func (g *depGraph[Obj]) needsWake() <-chan struct{} {
	switch {
	case g == nil || len(g.needs.watch) == 0:
		return nil
	case g.needs.anyOf != nil:
		return g.needs.anyOf.fired
	}
	return g.needs.watch[0]
}

// needsWoke records that needsWake's channel woke the loop.
func (g *depGraph[Obj]) needsWoke() {
	if g.needs.anyOf != nil {
		g.needs.anyOf.woke()
	}
}
