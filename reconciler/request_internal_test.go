package reconciler

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/statedb"
)

// newTestTable is a request table over int objects whose key is their
// decimal form and whose status is always Pending.
func newTestTable(dispatch bool) *requests[int] {
	return newRequests(dispatch, func(o int) string { return strconv.Itoa(o) },
		func(int) Status { return Status{Kind: StatusKindPending} }, func(int, Status) {})
}

// newOrderedTestTable is newTestTable in ordered mode: a priority, a
// fairness key and a target of each object's own, two operations at
// most per target.
func newOrderedTestTable() *requests[int] {
	tb := newTestTable(true)
	tb.order = newOrdering(Config[int]{Priority: func(o int) int { return o % 3 },
		FairnessKey: func(o int) string { return strconv.Itoa(o % 2) }, TargetKey: func(o int) string { return strconv.Itoa(o % 4) },
		MaxWait: 3 * time.Millisecond, TargetConcurrency: 2})
	return tb
}

func pendingCh(rev statedb.Revision) change[int] { return change[int]{obj: 1, rev: rev} }

// tableTally is what checkTable counts over the rows.
type tableTally struct {
	n                                                                 [reqStateCount]int
	kinds                                                             [statusKindCount]int
	failing, executing, active, retrying, refreshing, queued, untried int
}

// checkTable fails unless every structure the request table keeps is what
// its rows say (the table written next to its fields in request.go).
func checkTable(t *testing.T, tb *requests[int], step int) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("step %d: "+format, append([]any{step}, args...)...)
	}
	var c tableTally
	for key, r := range tb.rows {
		checkRow(fail, tb, key, r, &c)
		checkRowIndexes(fail, tb, key, r, &c)
	}
	switch {
	case c.n != tb.n:
		fail("rows per state %v, counted %v", c.n, tb.n)
	case c.kinds != tb.kinds:
		fail("kinds %v, counted %v", c.kinds, tb.kinds)
	case c.failing != tb.failing || c.failing != len(tb.failingRows) || c.executing != tb.executing:
		fail("failing %d, executing %d; counted %d (%d indexed), %d", c.failing, c.executing, tb.failing, len(tb.failingRows), tb.executing)
	case tb.order != nil && (c.queued != tb.order.marks.byAsk.Len() || c.untried != tb.order.marks.untried.Len()):
		fail("%d queued, %d untried; heaps %d, %d", c.queued, c.untried, tb.order.marks.byAsk.Len(), tb.order.marks.untried.Len())
	case c.active != len(tb.active) || c.active != len(tb.marks):
		fail("%d active rows, %d in active, %d marks", c.active, len(tb.active), len(tb.marks))
	case c.retrying != tb.byDue.Len() || c.retrying != tb.byAsk.Len() || c.refreshing != tb.refreshQ.Len():
		fail("%d retrying (heaps %d, %d), %d to refresh (heap %d)", c.retrying, tb.byDue.Len(), tb.byAsk.Len(), c.refreshing, tb.refreshQ.Len())
	}
}

// checkRow checks r's state against its fields, and counts it.
func checkRow(fail func(string, ...any), tb *requests[int], key string, r *request[int], c *tableTally) {
	if r.key != key || r.state >= reqStateCount {
		fail("row %q holds key %q, state %d", key, r.key, r.state)
	}
	c.n[r.state]++
	bare := r.state == stNotOwned || r.state == stUnset || r.state == stDraining
	switch {
	case bare != (r.detail == nil):
		fail("row %q in state %d has detail %v", key, r.state, r.detail != nil)
	case r.state == stBusy && r.running == 0, r.state == stQueued && r.running != 0:
		fail("row %q: state %d with running %d", key, r.state, r.running)
	case r.state == stDraining && r.running == 0:
		fail("row %q drains with no attempt running", key)
	}
	c.executing += b2i(r.running != 0)
	if r.detail != nil && r.err != "" {
		c.failing++
		if tb.failingRows[r.failIdx] != r {
			fail("row %q is not at failingRows[%d]", key, r.failIdx)
		}
	}
	if r.counted() {
		kind := r.expect.Kind
		if r.err != "" {
			kind = StatusKindError
		}
		c.kinds[kind]++
	}
}

// checkRowIndexes checks that r is where the structures of its state
// say, and counts it there.
func checkRowIndexes(fail func(string, ...any), tb *requests[int], key string, r *request[int], c *tableTally) {
	switch {
	case r.state == stQueued && tb.order != nil:
		c.queued++
		c.untried += b2i(!r.tried)
		if tb.order.marks.byAsk.Items[r.askIdx] != r || !r.tried && tb.order.marks.untried.Items[r.dueIdx] != r {
			fail("row %q is not where the ordering's heaps say", key)
		}
	case r.state == stQueued, r.state == stBusy, r.state == stRunning, r.state == stCommitting:
		c.active++
		m := activeMark{askedAt: r.askedAt, pickedAt: r.pickedAt, tried: r.tried}
		if tb.active[r.activeIdx] != r || tb.marks[r.activeIdx] != m {
			fail("row %q: not at active[%d], or its mark %+v is not %+v", key, r.activeIdx, tb.marks[r.activeIdx], m)
		}
	case r.state == stRetrying:
		c.retrying++
		if tb.byDue.Items[r.dueIdx] != r || tb.byAsk.Items[r.askIdx] != r {
			fail("row %q is not where the retry heaps say", key)
		}
	case (r.state == stHeld || r.state == stRefreshDue) && !r.due.IsZero():
		c.refreshing++
		if tb.refreshQ.Items[r.refreshIdx] != r {
			fail("row %q is not where the refresh heap says", key)
		}
	}
}

// viewByWalk is view read from the active rows themselves, not their
// marks: the two must agree.
func viewByWalk(tb *requests[int], readTo statedb.Revision, now time.Time) tableView[int] {
	v := tableView[int]{reconciled: readTo, retryLow: ^statedb.Revision(0), oldestPicked: now}
	walk := tb.active
	for _, r := range tb.rows {
		if r.state == stQueued && tb.order != nil {
			walk = append(walk[:len(walk):len(walk)], r)
		}
	}
	for _, r := range walk {
		picked := r.pickedAt
		if r.state == stQueued && tb.order != nil {
			picked = r.since // ordered: waiting from when it became ready
		}
		if !r.tried {
			v.reconciled = min(v.reconciled, r.askedAt-1)
		}
		if v.oldest == nil || r.askedAt < v.oldest.askedAt {
			v.oldest = r
		}
		if picked.Before(v.oldestPicked) {
			v.oldestPicked = picked
		}
	}
	finishView(tb, &v)
	return v
}

// TestRequestTableInvariants drives the request table through random
// transitions and checks after each that every structure it keeps is
// what its rows say, and that the view a report reads from the marks is
// the one the rows themselves give. Replay a seed with its subtest name.
func TestRequestTableInvariants(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			tb := newTestTable(seed%2 == 0)
			if seed%4 == 0 {
				tb = newOrderedTestTable()
			}
			d := &tableDriver{rng: rand.New(rand.NewPCG(seed, 0)), t: tb, now: time.Unix(1000, 0)}
			for step := range 600 {
				d.step()
				checkTable(t, d.t, step)
				got, want := view(d.t, d.rev, d.now), viewByWalk(d.t, d.rev, d.now)
				if got.reconciled != want.reconciled || got.retryLow != want.retryLow ||
					!got.oldestPicked.Equal(want.oldestPicked) || (got.oldest == nil) != (want.oldest == nil) ||
					(got.oldest != nil && got.oldest.askedAt != want.oldest.askedAt) {
					t.Fatalf("step %d: view %+v, by walking the rows %+v", step, got, want)
				}
			}
		})
	}
}

// TestCommittingRequest covers a row whose status write is out on the
// committer: it takes no room in a round, stays outstanding for the waits
// until landed, and a write that comes back after the row was replaced
// or settled is not its.
func TestCommittingRequest(t *testing.T) {
	t.Run("landed", committingLanded)
	t.Run("replaced meanwhile", committingReplaced)
	t.Run("settled meanwhile", committingSettled)
}

// startCommitting returns a table whose one request's status write is
// out on the committer, and the attempt's id.
func startCommitting(t *testing.T, now time.Time) (*requests[int], *request[int], uint64) {
	tb := newTestTable(true)
	r := tb.add("k", pendingCh(10), Status{Kind: StatusKindPending, ID: 7}, 10, now)
	if taken := takeReady(tb, nil, 0, now); len(taken) != 1 || taken[0] != r {
		t.Fatalf("take = %v, want the request", taken)
	}
	id := r.attempt
	if !tb.returned(r, id, now) {
		t.Fatal("the attempt's result is not wanted")
	}
	tb.writeOut(r, id, now)
	return tb, r, id
}

func committingLanded(t *testing.T) {
	now := time.Now()
	tb, r, id := startCommitting(t, now)
	if tb.n[stCommitting] != 1 || len(tb.active) != 1 {
		t.Fatalf("committing %d, active %d; want 1, 1", tb.n[stCommitting], len(tb.active))
	}
	// Outstanding for the waits: not settled, not yet attempted.
	if v := view(tb, 10, now); v.retryLow != 10 || v.reconciled != 9 {
		t.Fatalf("view: reconciled %d, retry low %d; want 9, 10", v.reconciled, v.retryLow)
	}
	if tb.kinds[StatusKindPending] != 1 {
		t.Fatalf("pending %d, want 1: the table holds Pending until the write lands", tb.kinds[StatusKindPending])
	}
	if !tb.writeBack(r, id) {
		t.Fatal("writeBack: the write is the request's own")
	}
	tb.settle(r)
	if tb.n[stCommitting] != 0 || len(tb.active) != 0 || len(tb.rows) != 0 {
		t.Fatalf("after settling: committing %d, active %d, rows %d; want none", tb.n[stCommitting], len(tb.active), len(tb.rows))
	}
}

func committingReplaced(t *testing.T) {
	now := time.Now()
	tb, r, id := startCommitting(t, now)
	if newer := tb.add("k", pendingCh(11), Status{Kind: StatusKindPending, ID: 8}, 11, now); newer != r {
		t.Fatal("the key's row was not reused") // the case that makes the id matter
	}
	if tb.n[stCommitting] != 0 || tb.writeBack(r, id) {
		t.Fatal("a write that came back after its request was replaced was taken as the new request's")
	}
	if r.state != stQueued {
		t.Fatalf("the newer request is in state %d, want Queued", r.state)
	}
}

func committingSettled(t *testing.T) {
	now := time.Now()
	tb, r, id := startCommitting(t, now)
	tb.settle(r) // e.g. disowned
	if tb.writeBack(r, id) {
		t.Fatal("a write that came back after its request settled was taken")
	}
	// The row is reused for another key and written out again under
	// a newer attempt: the old id still is not its.
	r2 := tb.add("other", pendingCh(12), Status{Kind: StatusKindPending, ID: 7}, 12, now)
	takeReady(tb, nil, 0, now)
	id2 := r2.attempt
	tb.returned(r2, id2, now)
	tb.writeOut(r2, id2, now)
	if r2 == r && tb.writeBack(r2, id) {
		t.Fatal("an old attempt's write was taken by a reused row")
	}
	if !tb.writeBack(r2, id2) {
		t.Fatal("the newer attempt's write is its own")
	}
}

// TestKeyBusyTakesNoRoom follows a key whose attempt runs past its
// timeout: the requests queued behind it, by a newer change or a due
// retry, are Busy (no room in a round) until the attempt returns, however
// they leave the queue.
func TestKeyBusyTakesNoRoom(t *testing.T) {
	now := time.Now()
	tb := newTestTable(true)
	busy := func(want int) {
		t.Helper()
		checkTable(t, tb, 0)
		if tb.n[stBusy] != want {
			t.Fatalf("%d Busy rows, want %d", tb.n[stBusy], want)
		}
	}
	r := tb.add("k", pendingCh(1), Status{Kind: StatusKindPending, ID: 1}, 1, now)
	takeReady(tb, nil, 0, now)
	stuck := r.attempt
	if !tb.overdue(r, stuck) {
		t.Fatal("the overdue attempt's result is not wanted")
	}
	tb.retry(r, now, whyBackoff, "timeout", now)
	busy(0)
	tb.requeue(r, now) // the retry came due; the attempt still runs
	busy(1)
	if taken := takeReady(tb, nil, 0, now); len(taken) != 0 {
		t.Fatalf("took %d requests while the key is busy", len(taken))
	}
	tb.add("k", pendingCh(2), Status{Kind: StatusKindPending, ID: 2}, 2, now) // a newer change replaces it
	busy(1)
	tb.settle(r) // e.g. given away
	busy(0)
	if r.state != stDraining {
		t.Fatalf("a settled row whose attempt runs is in state %d, want Draining", r.state)
	}
	tb.add("k", pendingCh(3), Status{Kind: StatusKindPending, ID: 3}, 3, now) // gained again
	busy(1)
	tb.returned(r, stuck, now)
	busy(0)
	if taken := takeReady(tb, nil, 0, now); len(taken) != 1 || taken[0].rev != 3 {
		t.Fatalf("took %v once the key is free, want the request of revision 3", taken)
	}
}

// TestUnownedKeepsKeysOnly: a key not owned is a bare NotOwned row; its
// delete, the owner's work, leaves nothing behind; a key gained counts
// from the first change read while it was not owned.
func TestUnownedKeepsKeysOnly(t *testing.T) {
	now := time.Now()
	tb := newTestTable(true)
	tb.add("k", change[int]{obj: 1, rev: 5}, Status{Kind: StatusKindPending, ID: 1}, 5, now)
	tb.lose("k", false, 5)
	if r := tb.rows["k"]; r == nil || r.state != stNotOwned || r.detail != nil || len(tb.active) != 0 || r.askedAt != 5 {
		t.Fatalf("after losing k: row %+v, %d active", r, len(tb.active))
	}
	tb.lose("k", false, 9) // a later change read while not owned
	if at, ok := tb.gained("k"); !ok || at != 5 {
		t.Fatalf("gained(k) = %d, %v; want 5, true", at, ok)
	}
	for i := range 1000 {
		key := string(rune('a'+i%26)) + string(rune(i))
		tb.lose(key, false, statedb.Revision(i+1))
		tb.lose(key, true, statedb.Revision(i+2))
	}
	if len(tb.rows) != 0 || tb.n[stNotOwned] != 0 {
		t.Fatalf("%d rows (%d NotOwned) kept for keys deleted while not owned", len(tb.rows), tb.n[stNotOwned])
	}
}
