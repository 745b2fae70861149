package order

import "time"

// What the queue says of its items without taking any: for the owner's
// reports (the oldest waits), for Explain (how many go first), for the
// status writes (whether an item was the last of its kind) and for the
// reader's look ahead (whether a new item would go first).

// Lone reports whether no item of priority, class and fairness key fair
// is queued: an item of them just taken was the last of its kind, not one
// of a burst. Stale entries behind a head count: it may report false for
// a lone item, never true for one of a burst.
func (q *Queue[T]) Lone(priority, class int, fair string) bool {
	i, found := q.find(priority, class)
	if !found {
		return true
	}
	fq := q.levels[i].byFair[fair]
	if fq == nil {
		return true
	}
	for _, tq := range fq.targets {
		q.dropStale(tq)
		if tq.len() > 0 {
			return false
		}
	}
	return true
}

// Oldest calls fn for every priority with ready items, highest first,
// with how long the longest-waiting of them has waited at now.
func (q *Queue[T]) Oldest(now time.Time, fn func(priority int, waited time.Duration)) {
	oldest := map[int]time.Duration{} // as slots keep times
	var order []int
	for _, l := range q.levels {
		q.dropStale(&l.arrivals)
		if l.arrivals.len() == 0 {
			continue
		}
		at := l.arrivals.peek().at
		if cur, ok := oldest[l.priority]; !ok {
			order = append(order, l.priority)
			oldest[l.priority] = at
		} else if at < cur {
			oldest[l.priority] = at
		}
	}
	for _, p := range order {
		fn(p, now.Sub(q.base.Add(oldest[p])))
	}
}

// OldestAt returns when the longest-waiting item became ready, or false
// when none waits.
func (q *Queue[T]) OldestAt() (time.Time, bool) {
	var at time.Duration // as slots keep times
	found := false
	for _, l := range q.levels {
		q.dropStale(&l.arrivals)
		if a := &l.arrivals; a.len() > 0 && (!found || a.peek().at < at) {
			at, found = a.peek().at, true
		}
	}
	if !found {
		return time.Time{}, false
	}
	return q.base.Add(at), true
}

// Ahead counts the items taken before an item of priority and class that
// became ready at at (self tells its entry), as the queue stands at now:
// when it has waited maxWait (overdue), the overdue items that waited
// longer, or as long and are met first (an earlier level, or earlier in
// its own); else the overdue items (they go first, whatever their level)
// and those of the levels taken before its own (higher). Items whose
// targets are capped are not counted among the overdue: they are passed
// over. It walks the queue, stale entries left out: for Explain, not for
// the owner's hot path.
func (q *Queue[T]) Ahead(priority, class int, at, now time.Time, self func(T) bool, capped func(string) bool) (higher, overdue int, isOverdue bool) {
	if len(q.levels) == 0 {
		return 0, 0, false
	}
	cutoff, mine := q.since(now.Add(-q.maxWait)), q.since(at)
	isOverdue = mine <= cutoff
	passed := false // the item's own entry has been met: a tie after it goes after it
	for _, l := range q.levels {
		before := l.priority > priority || l.priority == priority && l.class < class
		for _, s := range l.arrivals.items[l.arrivals.head:] {
			if !q.valid(s.item, s.gen) {
				continue
			}
			if self(s.item) {
				passed = true
				continue
			}
			switch {
			case s.at > cutoff || capped(s.tq.target):
				higher += b2i(before && !isOverdue)
			case !isOverdue || s.at < mine || s.at == mine && !passed:
				overdue++
			}
		}
	}
	return higher, overdue, isOverdue
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Passes reports whether a new item of class 0 with priority and fair
// would be taken before some item waiting now or unread in u (queued
// before it is): a level below its own holds items, or at its own level
// its fairness key holds fewer than half the items (round-robin takes it
// ahead of the busier keys'). A cheap upper bound: stale entries count.
func (q *Queue[T]) Passes(priority int, fair string, u *Unread) bool {
	if u.after(priority) {
		return true
	}
	n, mine := u.count(priority, fair)
	for i := len(q.levels) - 1; i >= 0; i-- {
		l := q.levels[i]
		switch {
		case l.priority > priority:
			return 2*mine < n // none queued of its level: the unread ones decide
		case l.priority == priority && l.class == 0:
			if fq := l.byFair[fair]; fq != nil {
				mine += fq.len()
			}
			return 2*mine < n+l.arrivals.len()
		case l.arrivals.len() > 0:
			return true
		}
	}
	return 2*mine < n
}

// len counts fq's entries, stale ones too.
func (fq *fairQueue[T]) len() int {
	n := 0
	for _, tq := range fq.targets {
		n += tq.len()
	}
	return n
}
