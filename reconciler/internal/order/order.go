// Package order is the reconciler's ordered queue of ready requests, for
// reconcilers that set a priority, a fairness key or per-target caps.
// Items are taken by priority (higher first), then class (lower first:
// the engine puts new changes before retries before refreshes);
// round-robin across fairness keys within that, and across targets within
// a fairness key; first come, first served within one. Aging bounds the
// wait: an item that has waited MaxWait is taken before any that has not,
// oldest first, whatever its priority. An item whose target is at its cap
// is passed over without losing its place.
//
// Items are removed lazily: the owner says, through Valid, whether an
// entry still stands for a ready item (it may have been taken through
// another path, replaced or withdrawn); stale entries are dropped when met.
package order

import (
	"slices"
	"time"
)

// Entry is one ready item as it was pushed.
type Entry[T any] struct {
	Item     T
	Gen      uint32 // the owner's stamp: Valid tells a stale entry by it
	Priority int
	Class    int
	Fair     string
	Target   string
	At       time.Time // when it became ready
}

// Queue is the queue. The zero value is not usable; use New.
type Queue[T any] struct {
	maxWait time.Duration
	valid   func(item T, gen uint32) bool
	levels  []*level[T] // by priority (highest first), then class
	base    time.Time   // the first time pushed: slots keep theirs from it
}

// level is one (priority, class): its entries in arrival order (for
// aging and the oldest wait), and by fairness key and target.
type level[T any] struct {
	priority, class int
	arrivals        fifo[T]
	fairs           []*fairQueue[T] // the round-robin ring
	byFair          map[string]*fairQueue[T]
	next            int // the ring's cursor
	// swept is how many entries arrivals kept at its last sweep.
	swept int
}

// fairQueue is one fairness key's entries, by target.
type fairQueue[T any] struct {
	key      string
	targets  []*fifo[T] // the round-robin ring
	byTarget map[string]*fifo[T]
	next     int
}

// New returns a queue whose items wait at most maxWait before being
// taken ahead of the others; valid reports whether an entry still stands.
func New[T any](maxWait time.Duration, valid func(item T, gen uint32) bool) *Queue[T] {
	return &Queue[T]{maxWait: maxWait, valid: valid}
}

// since returns t as a slot keeps it.
func (q *Queue[T]) since(t time.Time) time.Duration {
	if q.base.IsZero() {
		q.base = t
	}
	return t.Sub(q.base)
}

// entry is s, of level l, as it was pushed.
func (q *Queue[T]) entry(l *level[T], s slot[T]) Entry[T] {
	return Entry[T]{Item: s.item, Gen: s.gen, Priority: l.priority, Class: l.class,
		Fair: s.tq.fair, Target: s.tq.target, At: q.base.Add(s.at)}
}

// Push adds a ready item.
func (q *Queue[T]) Push(e Entry[T]) {
	l := q.level(e.Priority, e.Class)
	fq := l.byFair[e.Fair]
	if fq == nil {
		fq = &fairQueue[T]{key: e.Fair, byTarget: map[string]*fifo[T]{}}
		l.byFair[e.Fair] = fq
		l.fairs = append(l.fairs, fq)
	}
	tq := fq.byTarget[e.Target]
	if tq == nil {
		tq = &fifo[T]{fair: e.Fair, target: e.Target}
		fq.byTarget[e.Target] = tq
		fq.targets = append(fq.targets, tq)
	}
	s := slot[T]{item: e.Item, gen: e.Gen, at: q.since(e.At), tq: tq}
	l.arrivals.push(s)
	tq.push(s)
}

// level returns the level of (priority, class), making it in place.
func (q *Queue[T]) level(priority, class int) *level[T] {
	i, found := q.find(priority, class)
	if !found {
		q.levels = slices.Insert(q.levels, i, &level[T]{priority: priority, class: class, byFair: map[string]*fairQueue[T]{}})
	}
	return q.levels[i]
}

// find returns where the level of (priority, class) is in levels, or
// would be.
func (q *Queue[T]) find(priority, class int) (int, bool) {
	return slices.BinarySearchFunc(q.levels, [2]int{priority, class}, func(l *level[T], k [2]int) int {
		switch {
		case l.priority != k[0]:
			return k[0] - l.priority // higher priority first
		default:
			return l.class - k[1]
		}
	})
}

// Pop takes the next item: the oldest that has waited maxWait, if any,
// else the first by order. capped reports whether a target is at its cap:
// its items are passed over. It reports false when no item can be taken.
func (q *Queue[T]) Pop(now time.Time, capped func(target string) bool) (Entry[T], bool) {
	if e, ok := q.popOverdue(now, capped); ok {
		return e, true
	}
	for _, l := range q.levels {
		if e, ok := q.popLevel(l, capped); ok {
			return e, true
		}
	}
	q.prune()
	return Entry[T]{}, false
}

// popOverdue takes the oldest item that has waited maxWait and whose
// target has room. A level's arrivals give its oldest entry; when that
// entry's target is at its cap, the oldest entry of every other target is
// at the head of that target's list: one look per list finds the oldest
// that can be taken, however many entries of capped targets wait ahead of
// it (a hung target with a backlog is what caps are for).
func (q *Queue[T]) popOverdue(now time.Time, capped func(string) bool) (Entry[T], bool) {
	cutoff := q.since(now.Add(-q.maxWait))
	var best *level[T]
	var from *fifo[T]
	for _, l := range q.levels {
		q.dropStale(&l.arrivals)
		if l.arrivals.len() == 0 || l.arrivals.peek().at > cutoff {
			continue // none of the level has waited maxWait
		}
		f := &l.arrivals
		if capped(f.peek().tq.target) {
			f = q.oldestWithRoom(l, cutoff, capped)
			q.sweep(l) // its arrivals' head stays: stale entries gather behind it
		}
		if f != nil && (from == nil || f.peek().at < from.peek().at) {
			best, from = l, f
		}
	}
	if from == nil {
		return Entry[T]{}, false
	}
	s := *from.peek()
	from.drop()
	return q.entry(best, s), true // its copy in the other list is stale once the owner takes it
}

// oldestWithRoom returns the target list of l whose head has waited since
// cutoff, is the oldest such, and whose target has room; nil if none.
func (q *Queue[T]) oldestWithRoom(l *level[T], cutoff time.Duration, capped func(string) bool) *fifo[T] {
	var best *fifo[T]
	for _, fq := range l.fairs {
		for _, tq := range fq.targets {
			q.dropStale(tq)
			if tq.len() == 0 || capped(tq.target) {
				continue
			}
			if at := tq.peek().at; at <= cutoff && (best == nil || at < best.peek().at) {
				best = tq
			}
		}
	}
	return best
}

// sweep drops the stale entries of l's arrivals once they are at least
// half of it: items taken through their target lists leave their copies
// there, behind a head that stays while its target is capped. Each sweep
// halves the list at least, so its cost is spread over the pushes that
// filled it.
func (q *Queue[T]) sweep(l *level[T]) {
	a := &l.arrivals
	if a.len() < 2*l.swept+64 {
		return
	}
	kept := a.items[:0]
	for _, s := range a.items[a.head:] {
		if q.valid(s.item, s.gen) {
			kept = append(kept, s)
		}
	}
	clear(a.items[len(kept):])
	a.items, a.head = kept, 0
	l.swept = len(kept)
}

// popLevel takes the next item of l: round-robin across fairness keys,
// and across targets within one.
func (q *Queue[T]) popLevel(l *level[T], capped func(string) bool) (Entry[T], bool) {
	for n := len(l.fairs); n > 0; n-- {
		l.next %= len(l.fairs)
		fq := l.fairs[l.next]
		s, ok := q.popFair(fq, capped)
		if fq.empty() {
			delete(l.byFair, fq.key)
			l.fairs = slices.Delete(l.fairs, l.next, l.next+1)
		} else {
			l.next++
		}
		if ok {
			return q.entry(l, s), true
		}
	}
	return Entry[T]{}, false
}

// popFair takes the next item of fq whose target has room.
func (q *Queue[T]) popFair(fq *fairQueue[T], capped func(string) bool) (slot[T], bool) {
	for n := len(fq.targets); n > 0; n-- {
		fq.next %= len(fq.targets)
		tq := fq.targets[fq.next]
		q.dropStale(tq)
		switch {
		case tq.len() == 0:
			delete(fq.byTarget, tq.target)
			fq.targets = slices.Delete(fq.targets, fq.next, fq.next+1)
			continue
		case capped(tq.target):
			fq.next++
			continue
		}
		s := *tq.peek()
		tq.drop()
		fq.next++
		return s, true
	}
	return slot[T]{}, false
}

func (fq *fairQueue[T]) empty() bool {
	for _, tq := range fq.targets {
		if tq.len() > 0 {
			return false
		}
	}
	return true
}

// dropStale drops the entries at f's head that no longer stand.
func (q *Queue[T]) dropStale(f *fifo[T]) {
	for f.len() > 0 && !q.valid(f.peek().item, f.peek().gen) {
		f.drop()
	}
}

// prune drops the levels left with nothing in them.
func (q *Queue[T]) prune() {
	q.levels = slices.DeleteFunc(q.levels, func(l *level[T]) bool {
		q.dropStale(&l.arrivals)
		return l.arrivals.len() == 0 && len(l.fairs) == 0
	})
}
