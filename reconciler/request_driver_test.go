package reconciler

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/cilium/statedb"
)

// tableDriver drives a request table through random transitions of both
// executors: changes, dispatch, results, retries, Syncs taken and
// untaken, ownership lost and gained, Unset, refresh put off, settling.
type tableDriver struct {
	rng     *rand.Rand
	t       *requests[int]
	now     time.Time
	rev     statedb.Revision
	running []*request[int]
}

// step makes one random transition: of a key (a change, a dispatch, a
// Sync, ownership...), or of a row an attempt runs for (keyOp says no).
func (d *tableDriver) step() {
	d.now = d.now.Add(time.Duration(d.rng.IntN(5)) * time.Millisecond)
	var r *request[int]
	if len(d.running) > 0 {
		r = d.running[d.rng.IntN(len(d.running))]
	}
	key := "k" + strconv.Itoa(d.rng.IntN(12))
	op := d.rng.IntN(14)
	if !d.keyOp(op, key) && r != nil && r.detail != nil && (op == 7 || r.state == stRunning) {
		d.rowOp(op, r)
	}
}

// keyOp makes op's transition of key or of the whole table, and reports
// whether op was one of those.
func (d *tableDriver) keyOp(op int, key string) bool {
	tb := d.t
	switch {
	case op <= 1: // a change
		d.rev++
		tb.add(key, change[int]{obj: int(d.rev), rev: d.rev, deleted: op == 1 && d.rng.IntN(4) == 0},
			Status{Kind: StatusKindPending, ID: uint64(d.rev)}, max(1, d.rev-statedb.Revision(d.rng.IntN(2))), d.now) // a revision is never 0
	case op == 2: // dispatch (ordered: a few at a time)
		d.running = takeReady(tb, d.running[:0], 1+d.rng.IntN(4), d.now)
	case (op == 3 || op == 7) && tb.order != nil: // ordered mode is per-object: no Sync
	case op == 3: // a Sync takes everything
		d.running, _ = tb.takeAll(d.running[:0], d.now)
	case op == 6: // due retries come back
		for r, ok := tb.popDue(d.now); ok; r, ok = tb.popDue(d.now) {
			tb.requeue(r, d.now)
		}
	case op == 9: // ownership lost, or gained back
		if d.rng.IntN(2) == 0 {
			tb.lose(key, d.rng.IntN(3) == 0, max(1, d.rev))
		} else if at, ok := tb.gained(key); ok {
			tb.add(key, change[int]{obj: 1, rev: d.rev}, Status{Kind: StatusKindPending, ID: 1}, at, d.now)
		}
	case op == 10: // Unset, or not
		tb.unset(key, d.rng.IntN(2) == 0)
	case op == 11: // a refresh put off, or due
		rf := &refresher[int]{t: tb}
		if d.rng.IntN(2) == 0 {
			rf.later(key, change[int]{obj: 1, rev: d.rev}, d.now.Add(time.Millisecond), d.now)
		} else if r, ok := rf.popRow(d.now); ok {
			rf.unschedule(r, d.now)
		}
	default:
		return false
	}
	return true
}

// rowOp makes op's transition of r, a row an attempt was started for.
func (d *tableDriver) rowOp(op int, r *request[int]) {
	tb := d.t
	switch op {
	case 4: // a result: failed, retried later
		tb.returned(r, r.running, d.now)
		tb.setTried(r)
		tb.retry(r, d.now.Add(time.Millisecond), whyBackoff, "boom", d.now)
	case 5: // a result: settled
		tb.returned(r, r.running, d.now)
		tb.setTried(r)
		tb.settle(r)
	case 7: // a Sync that did not run
		tb.untake(r)
	case 8: // a result in, its write out
		if tb.returned(r, r.attempt, d.now) {
			tb.setTried(r)
			tb.writeOut(r, 0, d.now)
		}
	case 12: // given up on, refreshed later
		tb.returned(r, r.running, d.now)
		tb.hold(r, whyPermanent, "bad", d.now.Add(time.Millisecond), d.now)
	case 13: // overdue
		tb.overdue(r, r.attempt)
	}
}
