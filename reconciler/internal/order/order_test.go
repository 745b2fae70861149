package order

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// item is a test item: an id, and whether it is still ready (taken, or
// withdrawn, makes its entries stale).
type item struct {
	id     int
	target string
	ready  bool
	gen    uint32
}

func newQueue(maxWait time.Duration) *Queue[*item] {
	return New(maxWait, func(it *item, gen uint32) bool { return it.ready && it.gen == gen })
}

func push(q *Queue[*item], it *item, prio, class int, fair, target string, at time.Time) {
	it.ready, it.target = true, target
	it.gen++
	q.Push(Entry[*item]{Item: it, Gen: it.gen, Priority: prio, Class: class, Fair: fair, Target: target, At: at})
}

// popAll pops until nothing can be taken, marking what it takes.
func popAll(q *Queue[*item], now time.Time, capped func(string) bool) []int {
	var ids []int
	for {
		e, ok := q.Pop(now, capped)
		if !ok {
			return ids
		}
		e.Item.ready = false
		ids = append(ids, e.Item.id)
	}
}

func none(string) bool { return false }

// TestOrder: priority first, then class, round-robin across fairness
// keys and, within one, across targets; first come first served within
// one; a capped target's items are passed over and keep their place.
func TestOrder(t *testing.T) {
	t0 := time.Unix(0, 0)
	q := newQueue(time.Hour)
	items := make([]*item, 12)
	for i := range items {
		items[i] = &item{id: i}
	}
	push(q, items[0], 0, 0, "a", "x", t0)
	push(q, items[1], 0, 0, "a", "x", t0)
	push(q, items[2], 0, 0, "b", "x", t0)
	push(q, items[3], 5, 1, "a", "x", t0) // a retry of priority 5
	push(q, items[4], 5, 0, "a", "x", t0) // a change of priority 5
	push(q, items[5], 0, 0, "a", "y", t0)
	push(q, items[6], -1, 0, "a", "x", t0)
	if got, want := popAll(q, t0, none), []int{4, 3, 0, 2, 5, 1, 6}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	push(q, items[7], 0, 0, "a", "hung", t0)
	push(q, items[8], 0, 0, "a", "ok", t0)
	push(q, items[9], 0, 0, "a", "hung", t0)
	hung := func(target string) bool { return target == "hung" }
	if got := popAll(q, t0, hung); !slices.Equal(got, []int{8}) {
		t.Fatalf("with target hung capped: took %v, want only 8", got)
	}
	if got := popAll(q, t0, none); !slices.Equal(got, []int{7, 9}) {
		t.Fatalf("once uncapped: took %v, want 7 then 9", got)
	}
	// A stale entry (taken elsewhere, or replaced) is passed over.
	push(q, items[10], 0, 0, "", "", t0)
	push(q, items[11], 0, 0, "", "", t0)
	items[10].ready = false
	if got := popAll(q, t0, none); !slices.Equal(got, []int{11}) {
		t.Fatalf("took %v, want 11 alone (10 is stale)", got)
	}
}

// TestAgingNeverOvertaken drives the queue with random items (random
// priorities, classes, fairness keys and targets, some capped for a
// while, some withdrawn) over a fake clock, and checks every pop: an item
// that has waited maxWait is never passed over for one that came after
// it (aging is first come, first served), and an item waits past maxWait
// only behind such earlier ones. A low priority delays an item; it never
// starves it. Replay a seed with its subtest name.
func TestAgingNeverOvertaken(t *testing.T) {
	const maxWait = 50 * time.Millisecond
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			q := newQueue(maxWait)
			now := time.Unix(0, 0)
			var live []*item // pushed, not yet taken
			at := map[*item]time.Time{}
			next := 0
			cappedTarget := ""
			for step := range 3000 {
				now = now.Add(time.Millisecond)
				if step%200 == 0 {
					cappedTarget = []string{"", "t1", "t2"}[rng.IntN(3)] // a target at its cap for a while
				}
				capped := func(target string) bool { return target != "" && target == cappedTarget }
				for range rng.IntN(4) { // 1.5 a millisecond: below the 2 taken
					it := &item{id: next}
					next++
					push(q, it, rng.IntN(4), rng.IntN(3), fmt.Sprint("f", rng.IntN(5)), fmt.Sprint("t", rng.IntN(3)), now)
					live, at[it] = append(live, it), now
				}
				if cappedTarget != "" && rng.IntN(150) == 0 { // a burst for the capped target: more than any bounded scan
					for range 65 + rng.IntN(100) {
						it := &item{id: next}
						next++
						push(q, it, rng.IntN(4), rng.IntN(3), fmt.Sprint("f", rng.IntN(5)), cappedTarget, now)
						live, at[it] = append(live, it), now
					}
				}
				if len(live) > 0 && rng.IntN(20) == 0 { // withdrawn
					i := rng.IntN(len(live))
					live[i].ready = false
					live = slices.Delete(live, i, i+1)
				}
				for range 2 { // two taken a millisecond
					e, ok := q.Pop(now, capped)
					if !ok {
						break
					}
					checkPop(t, step, e, live, at, now, maxWait, capped)
					e.Item.ready = false
					live = slices.DeleteFunc(live, func(it *item) bool { return it == e.Item })
				}
			}
		})
	}
}

// TestAgingPastCappedBacklog: however many overdue entries of a capped
// target wait ahead of it in its level, an overdue entry of a target with
// room is taken before a later one of higher priority; and the stale
// copies its taking leaves behind the capped head do not pile up.
func TestAgingPastCappedBacklog(t *testing.T) {
	for _, hung := range []int{10, 70, 300, 5000} {
		t.Run(fmt.Sprint("hung=", hung), func(t *testing.T) {
			t0 := time.Unix(0, 0)
			q := newQueue(20 * time.Millisecond)
			for i := range hung {
				push(q, &item{id: 1000 + i}, 0, 0, "", "hung", t0)
			}
			lo := &item{id: 1}
			push(q, lo, 0, 0, "", "ok", t0.Add(time.Millisecond))
			hi := &item{id: 2}
			push(q, hi, 10, 0, "", "ok", t0.Add(30*time.Millisecond))
			capped := func(target string) bool { return target == "hung" }
			now := t0.Add(30 * time.Millisecond)
			if got := popAll(q, now, capped); !slices.Equal(got, []int{1, 2}) {
				t.Fatalf("took %v, want the overdue 1 before the later 2 of higher priority", got)
			}
			// Many items of the other target come and go while the
			// capped head stays: the level's arrivals stay bounded.
			for i := range 10 * hung {
				it := &item{id: 10_000 + i}
				push(q, it, 0, 0, "", "ok", now)
				now = now.Add(time.Millisecond)
				if e, ok := q.Pop(now, capped); !ok || e.Item != it {
					t.Fatalf("step %d: took %v %v, want item %d", i, e.Item, ok, it.id)
				}
				it.ready = false
			}
			if n := q.levels[len(q.levels)-1].arrivals.len(); n > 2*hung+64 {
				t.Fatalf("the level's arrivals hold %d entries for %d live ones", n, hung)
			}
		})
	}
}

// checkPop fails when e was taken while an item that arrived before it
// had waited maxWait and could be taken (its target not capped).
func checkPop(t *testing.T, step int, e Entry[*item], live []*item, at map[*item]time.Time, now time.Time, maxWait time.Duration, capped func(string) bool) {
	t.Helper()
	for _, other := range live {
		if other == e.Item || !at[other].Before(e.At) || now.Sub(at[other]) < maxWait {
			continue
		}
		if capped(other.target) {
			continue
		}
		t.Fatalf("step %d: took item %d (ready %s ago) over item %d, ready %s ago, past maxWait",
			step, e.Item.id, now.Sub(e.At), other.id, now.Sub(at[other]))
	}
}

// TestOldestAndAhead: the oldest wait per priority, highest first, and
// how many items are ahead of a priority and class.
func TestOldestAndAhead(t *testing.T) {
	t0 := time.Unix(0, 0)
	q := newQueue(time.Hour)
	push(q, &item{id: 1}, 1, 0, "", "", t0)
	push(q, &item{id: 2}, 1, 1, "", "", t0.Add(time.Second))
	push(q, &item{id: 3}, 0, 0, "", "", t0.Add(2*time.Second))
	var got []string
	q.Oldest(t0.Add(10*time.Second), func(p int, d time.Duration) { got = append(got, fmt.Sprint(p, ":", d)) })
	if want := []string{"1:10s", "0:8s"}; !slices.Equal(got, want) {
		t.Fatalf("oldest %v, want %v", got, want)
	}
	if n, _, _ := q.Ahead(0, 0, t0.Add(3*time.Second), t0.Add(10*time.Second), func(*item) bool { return false }, none); n != 2 {
		t.Fatalf("%d ahead of priority 0, want 2", n)
	}
	if n, _, _ := q.Ahead(1, 1, t0.Add(3*time.Second), t0.Add(10*time.Second), func(*item) bool { return false }, none); n != 1 {
		t.Fatalf("%d ahead of a priority 1 retry, want the priority 1 change", n)
	}
}

// TestPasses: what a new item would be taken before. Passes is what the
// reconciler reads ahead of a backlog by, so both answers matter: a false
// true costs a read, a false false leaves a change behind the backlog.
func TestPasses(t *testing.T) {
	at := time.Unix(0, 0)
	tests := []struct {
		name   string
		queued [][3]any // priority, class, fairness key
		unread [][3]any // the same, looked at ahead and left unread
		prio   int
		fair   string
		want   bool
	}{
		{"empty queue", nil, nil, 0, "", false},
		{"above a lower priority", [][3]any{{-100, 0, ""}}, nil, 0, "", true},
		{"equal priority, one key", [][3]any{{0, 0, ""}, {0, 0, ""}}, nil, 0, "", false},
		{"below a higher priority", [][3]any{{10, 0, ""}}, nil, 0, "", false},
		{"before a retry of its priority", [][3]any{{0, 1, ""}}, nil, 0, "", true},
		{"quiet key beside a busy one", [][3]any{{0, 0, "A"}, {0, 0, "A"}, {0, 0, "A"}}, nil, 0, "B", true},
		{"busy key itself", [][3]any{{0, 0, "A"}, {0, 0, "A"}, {0, 0, "B"}}, nil, 0, "A", false},
		{"key with a third of the level", [][3]any{{0, 0, "A"}, {0, 0, "A"}, {0, 0, "B"}}, nil, 0, "B", true},
		{"higher level first, lower below", [][3]any{{10, 0, ""}, {-5, 0, ""}}, nil, 0, "", true},
		// What the reader looked at and left unread will be queued
		// before the change is read: it counts as queued.
		{"above an unread lower priority", [][3]any{{20, 0, ""}}, [][3]any{{0, 0, ""}}, 10, "", true},
		{"below unread higher only", [][3]any{{20, 0, ""}}, [][3]any{{20, 0, ""}}, 10, "", false},
		{"before an unread refresh", nil, [][3]any{{0, 2, ""}}, 0, "", true},
		{"quiet key beside a busy unread one", nil, [][3]any{{0, 0, "A"}, {0, 0, "A"}}, 0, "B", true},
		{"busy unread key itself", nil, [][3]any{{0, 0, "A"}, {0, 0, "A"}}, 0, "A", false},
		{"queued and unread of one key", [][3]any{{0, 0, "A"}}, [][3]any{{0, 0, "B"}, {0, 0, "B"}}, 0, "A", true},
		{"queued and unread of one busy key", [][3]any{{0, 0, "B"}}, [][3]any{{0, 0, "B"}, {0, 0, "A"}}, 0, "B", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newQueue(time.Hour)
			for i, e := range tt.queued {
				push(q, &item{id: i}, e[0].(int), e[1].(int), e[2].(string), "", at)
			}
			var u Unread
			for _, e := range tt.unread {
				u.Add(e[0].(int), e[1].(int), e[2].(string))
			}
			if got := q.Passes(tt.prio, tt.fair, &u); got != tt.want {
				t.Fatalf("Passes(%d, %q) = %v, want %v", tt.prio, tt.fair, got, tt.want)
			}
		})
	}
}

// TestLone checks Lone: whether an item of a priority, class and
// fairness key has others of its kind queued, whatever else is.
func TestLone(t *testing.T) {
	at := time.Unix(0, 0)
	tests := []struct {
		name   string
		queued [][4]any // priority, class, fairness key, target
		prio   int
		class  int
		fair   string
		want   bool
	}{
		{"empty queue", nil, 0, 0, "", true},
		{"one of a burst", [][4]any{{0, 0, "", ""}, {0, 0, "", ""}}, 0, 0, "", false},
		{"above a burst", [][4]any{{-100, 0, "", ""}, {-100, 0, "", ""}}, 0, 0, "", true},
		{"another class of its priority", [][4]any{{0, 1, "", ""}}, 0, 0, "", true},
		{"quiet key beside a busy one", [][4]any{{0, 0, "A", ""}, {0, 0, "A", ""}}, 0, 0, "B", true},
		{"busy key itself", [][4]any{{0, 0, "A", ""}, {0, 0, "B", ""}}, 0, 0, "A", false},
		{"its key, another target", [][4]any{{0, 0, "A", "t1"}, {0, 0, "A", "t2"}}, 0, 0, "A", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newQueue(time.Hour)
			for i, e := range tt.queued {
				push(q, &item{id: i}, e[0].(int), e[1].(int), e[2].(string), e[3].(string), at)
			}
			if got := q.Lone(tt.prio, tt.class, tt.fair); got != tt.want {
				t.Fatalf("Lone(%d, %d, %q) = %v, want %v", tt.prio, tt.class, tt.fair, got, tt.want)
			}
		})
	}
	// Stale entries do not count: an item replaced since it was queued
	// leaves its kind empty.
	q := newQueue(time.Hour)
	it := &item{id: 1}
	push(q, it, 0, 0, "", "", at)
	if q.Lone(0, 0, "") {
		t.Fatal("Lone with one valid item queued = true")
	}
	it.ready = false
	if !q.Lone(0, 0, "") {
		t.Fatal("Lone with only a stale entry queued = false")
	}
}

// TestPopReturnsEntryAsPushed: the queue keeps an entry in a compact
// slot; what Pop returns, in order or overdue, is the entry as pushed,
// with its priority, class, fairness key, target and time.
func TestPopReturnsEntryAsPushed(t *testing.T) {
	t0 := time.Now()
	for _, overdue := range []bool{false, true} {
		q := newQueue(time.Second)
		a, b := &item{id: 1}, &item{id: 2}
		push(q, a, 5, 1, "tenant-a", "target-x", t0.Add(3*time.Millisecond))
		push(q, b, 7, 0, "tenant-b", "target-y", t0.Add(5*time.Millisecond))
		now := t0.Add(10 * time.Millisecond) // in order: b (priority 7) first
		if overdue {
			now = t0.Add(2 * time.Second) // both overdue: a, the older, first
		}
		want := []Entry[*item]{
			{Item: b, Gen: b.gen, Priority: 7, Class: 0, Fair: "tenant-b", Target: "target-y", At: t0.Add(5 * time.Millisecond)},
			{Item: a, Gen: a.gen, Priority: 5, Class: 1, Fair: "tenant-a", Target: "target-x", At: t0.Add(3 * time.Millisecond)},
		}
		if overdue {
			want[0], want[1] = want[1], want[0]
		}
		for _, w := range want {
			e, ok := q.Pop(now, none)
			if !ok {
				t.Fatalf("overdue=%v: nothing popped, want item %d", overdue, w.Item.id)
			}
			e.Item.ready = false
			if e.Item != w.Item || e.Gen != w.Gen || e.Priority != w.Priority || e.Class != w.Class ||
				e.Fair != w.Fair || e.Target != w.Target || !e.At.Equal(w.At) {
				t.Errorf("overdue=%v: popped %+v, want %+v", overdue, e, w)
			}
		}
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestAheadAgreesWithPop: what Ahead says goes before an item is what
// Pop then takes before it, with nothing pushed meanwhile: exactly the
// count for an overdue item, at least it for another (round-robin within
// its own level may take some of its peers first), and exactly it when
// the item is alone in its level.
func TestAheadAgreesWithPop(t *testing.T) {
	const maxWait = 50 * time.Millisecond
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		q := newQueue(maxWait)
		t0 := time.Unix(0, 0)
		all := randomItems(q, rng, t0)
		now := t0.Add(120 * time.Millisecond)
		var x *item
		for _, it := range all {
			if it.ready && (x == nil || rng.IntN(3) == 0) {
				x = it
			}
		}
		if x == nil {
			continue
		}
		xe, peers := entryOf(q, x)
		higher, overdue, isOverdue := q.Ahead(xe.Priority, xe.Class, xe.At, now, func(it *item) bool { return it == x }, none)
		pos := slices.Index(popAll(q, now, none), x.id)
		switch {
		case isOverdue && pos != overdue:
			t.Fatalf("seed %d: overdue item taken %dth, Ahead said %d go first", seed, pos, overdue)
		case !isOverdue && pos < higher+overdue:
			t.Fatalf("seed %d: item taken %dth, Ahead said %d+%d go first", seed, pos, higher, overdue)
		case !isOverdue && peers == 0 && pos != higher+overdue:
			t.Fatalf("seed %d: item alone in its level taken %dth, Ahead said %d+%d go first", seed, pos, higher, overdue)
		}
	}
}

// randomItems pushes up to 40 items of random levels and fairness keys,
// ready one after the other from t0, a tenth of them stale.
func randomItems(q *Queue[*item], rng *rand.Rand, t0 time.Time) []*item {
	var all []*item
	at := t0
	for i := range 1 + rng.IntN(40) {
		it := &item{id: i}
		at = at.Add(time.Duration(rng.IntN(5)) * time.Millisecond) // pushed as they become ready
		push(q, it, rng.IntN(3), rng.IntN(2), fmt.Sprint("f", rng.IntN(3)), "", at)
		all = append(all, it)
		if rng.IntN(10) == 0 { // taken elsewhere: stale
			it.ready = false
		}
	}
	return all
}

// entryOf returns x's entry as queued, and how many other valid items
// share its level.
func entryOf(q *Queue[*item], x *item) (e Entry[*item], peers int) {
	for _, l := range q.levels {
		for _, s := range l.arrivals.items[l.arrivals.head:] {
			if s.item == x && s.gen == x.gen {
				e = q.entry(l, s)
			}
		}
	}
	for _, l := range q.levels {
		if l.priority != e.Priority || l.class != e.Class {
			continue
		}
		for _, s := range l.arrivals.items[l.arrivals.head:] {
			if s.item != x && s.item.ready && s.gen == s.item.gen {
				peers++
			}
		}
	}
	return e, peers
}
