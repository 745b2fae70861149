package order

// Unread is what a reader that looks ahead of its place has looked at and
// left unread: the changes between its place and how far it looked. Each
// of them will be queued before any change written after it is read, so a
// change is judged against them as well as against the queue (Passes): a
// judgement made against the queue alone, as it was at one moment, would
// skip a change for good that the order takes before rows the reader has
// not queued yet. The zero value is empty and ready to use.
type Unread struct {
	levels map[levelKey]*unreadLevel
	lowest levelKey // of the levels held, the one taken last
}

// levelKey is a level's (priority, class).
type levelKey struct{ priority, class int }

// before reports whether level k is taken before level o.
func (k levelKey) before(o levelKey) bool {
	return k.priority > o.priority || k.priority == o.priority && k.class < o.class
}

// unreadLevel counts one level's unread changes, and by fairness key.
type unreadLevel struct {
	n      int
	byFair map[string]int
}

// Add records an unread change of priority, class and fairness key fair.
func (u *Unread) Add(priority, class int, fair string) {
	k := levelKey{priority, class}
	if u.levels == nil {
		u.levels = map[levelKey]*unreadLevel{}
	}
	l := u.levels[k]
	if l == nil {
		if len(u.levels) == 0 || u.lowest.before(k) {
			u.lowest = k
		}
		l = &unreadLevel{byFair: map[string]int{}}
		u.levels[k] = l
	}
	l.n++
	l.byFair[fair]++
}

// Reset forgets everything: the reader has read up to where it looked.
func (u *Unread) Reset() { clear(u.levels) }

// Len counts the unread changes recorded.
func (u *Unread) Len() int {
	n := 0
	for _, l := range u.levels {
		n += l.n
	}
	return n
}

// count returns the unread changes of (priority, class 0), and those of
// them with fairness key fair.
func (u *Unread) count(priority int, fair string) (n, mine int) {
	if l := u.levels[levelKey{priority, 0}]; l != nil {
		return l.n, l.byFair[fair]
	}
	return 0, 0
}

// after reports whether an unread change is of a level taken after a new
// change of priority (class 0).
func (u *Unread) after(priority int) bool {
	return len(u.levels) > 0 && levelKey{priority, 0}.before(u.lowest)
}
