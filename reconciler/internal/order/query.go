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

// Ahead counts, for an item of priority and class, the valid items of the
// levels taken before its own (an upper bound: stale entries behind a
// level's head are counted too).
func (q *Queue[T]) Ahead(priority, class int) int {
	n := 0
	for _, l := range q.levels {
		if l.priority < priority || l.priority == priority && l.class >= class {
			break
		}
		q.dropStale(&l.arrivals)
		n += l.arrivals.len()
	}
	return n
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
