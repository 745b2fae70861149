package reconciler

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/cilium/statedb"
)

// Status writes, the same for both loops: one write transaction per
// commit, one rule for whether a write is still this reconciler's
// (writeStatus), and one for what its outcome means (afterWrite).

// statusWrite is one status write into the table.
type statusWrite[Obj any] struct {
	key    string
	obj    Obj              // the object the operation saw (its primary key finds the current one)
	rev    statedb.Revision // its revision
	target Obj              // the operation's clone: written when the object is unchanged
	// hasTarget is false when the operation never got its clone (it is
	// still running past its timeout): obj, at rev, is cloned instead.
	hasTarget bool
	expect    Status // this reconciler's status the write requires in the table
	status    Status // the status to write
	// fenced is set with Config.Ownership: the write lands only if this
	// replica owns the key when it is made, in the write transaction.
	fenced  bool
	outcome writeOutcome
	// current is this reconciler's status found in the table when the
	// write did not land for want of expect (writeSuperseded, writeOwed).
	current Status
}

// writeOutcome is what became of a status write.
type writeOutcome uint8

const (
	writeLanded     writeOutcome = iota
	writeSuperseded              // our status is a newer request now, or the object went: the change iterator delivers it
	writeOwed                    // our status is a Done or Error the request did not expect: no newer request follows
	writeNotOwned                // this replica does not own the key (Config.Ownership)
	writeKeyChanged              // SetObjectStatus returned an object with another primary key
)

// written is what one write transaction of status writes came to: the
// revisions it wrote (from > to when none) and when it was committed.
type written struct {
	from, to statedb.Revision
	at       time.Time
}

// yieldEvery is how many status writes a long write transaction makes
// between yields of its processor, when there are more workers than
// processors. A commit of hundreds of writes holds a processor for about
// a millisecond; operations whose I/O completes meanwhile (hundreds, at
// Concurrency 256) queue behind it, and the workers idle for it. A
// yield lets them run first. It costs the table's other writers a little
// longer wait for the write lock, and is left out with few workers: at
// Concurrency 1 it cost noop-1m 8% (it gives the processor to the loop
// and the inserters, which wait for this transaction anyway). Measured
// at Concurrency 256 (slow-1ms/c256), medians of 45 runs without and
// with: 142k against 149k objects/s, and 155k against 157k in a second
// set.
const yieldEvery = 64

// writeAll makes the writes in one write transaction and returns what it
// wrote (nothing, and a zero time, when there was nothing to write). When
// ctx has ended it aborts and reports false: nothing is written after
// Stop. Right before the commit, own learns the revisions written, so
// that whoever reads the changes after it recognizes them as this
// reconciler's own. Both loops commit through it; it touches nothing but
// the table, own and the writes' outcomes, so the per-object loop runs it
// on its committer goroutine too.
func (r *reconciler[Obj]) writeAll(ctx context.Context, writes []statusWrite[Obj], own ownWriter) (written, bool) {
	if len(writes) == 0 {
		return written{from: 1}, true
	}
	yield := r.cfg.Concurrency > runtime.GOMAXPROCS(0)
	wtxn := r.db.WriteTxn(r.cfg.Table)
	from := r.cfg.Table.Revision(wtxn) + 1
	for i := range writes {
		writes[i].outcome = r.writeStatus(wtxn, &writes[i])
		if yield && i%yieldEvery == yieldEvery-1 {
			runtime.Gosched()
		}
	}
	if ctx.Err() != nil {
		wtxn.Abort()
		return written{}, false
	}
	wr := written{from: from, to: r.cfg.Table.Revision(wtxn)}
	own.add(wr)
	wtxn.Commit()
	wr.at = time.Now()
	return wr, true
}

// ownWriter records the revisions of a reconciler's own status writes.
type ownWriter interface{ add(written) }

// afterWrite applies what became of r's status write w to the verdict
// (err, giveUp), and reports false when r moved on already. The one rule:
// a write that did not land leaves a request that still owes the work,
// unless a newer request exists. So a superseded write settles r (the
// change iterator delivers the newer request, or the delete); a write
// into a key this replica does not own takes r out of the work (lose);
// a write that found a Done or Error r did not expect (an earlier
// attempt's write that landed late, after the key was given away and
// gained again) keeps r, which runs again at once from the table as it
// is now and writes over what it found. A changed key makes the verdict
// a misconfiguration; a landed Error is what the table now holds. Both
// loops settle through it.
func (wk *work[Obj]) afterWrite(r *request[Obj], w *statusWrite[Obj], err *error, giveUp *bool, now time.Time) bool {
	switch {
	case w == nil:
	case w.outcome == writeSuperseded:
		wk.settle(r)
		return false
	case w.outcome == writeNotOwned:
		wk.lose(r.key, r.deleted, r.askedAt)
		return false
	case w.outcome == writeOwed:
		wk.setExpect(r, w.current)
		wk.retry(r, now, true, "", now)
		return false
	case w.outcome == writeKeyChanged:
		*err, *giveUp = fmt.Errorf("%w: Config.SetObjectStatus changed the object's primary key", ErrInvalidConfig), true
	case *err != nil:
		wk.setExpect(r, w.status)
	}
	return true
}

// revRanges remembers the revisions of the reconciler's own status writes
// until the change iterator has read past them. Each object written in a
// write transaction gets a revision of its own, in one run no other
// writer interleaves with: a change read at one of them is the
// reconciler's own write, read back. A write's echo is read only after
// every change committed before it, a whole backlog later under load, so
// the ranges are kept until read past, not for a fixed number of commits.
type revRanges struct {
	q    []written // by revision
	head int       // q[:head] are read past
}

// add records a range of revisions written. Ranges come in revision order
// but for the committer's, which the loop learns of late (copyTo).
func (rr *revRanges) add(wr written) {
	if wr.to < wr.from {
		return // nothing was written
	}
	rr.q = append(rr.q, written{from: wr.from, to: wr.to})
	for i := len(rr.q) - 1; i > rr.head && rr.q[i-1].from > rr.q[i].from; i-- {
		rr.q[i-1], rr.q[i] = rr.q[i], rr.q[i-1]
	}
}

// has reports whether rev was written by the reconciler itself. The
// revisions asked about only grow (the change iterator reads in revision
// order), so the ranges below rev are dropped.
func (rr *revRanges) has(rev statedb.Revision) bool {
	rr.readPast(rev - 1)
	return rr.head < len(rr.q) && rev >= rr.q[rr.head].from
}

// readPast drops the ranges at or below rev: every change up to rev has
// been read.
func (rr *revRanges) readPast(rev statedb.Revision) {
	for rr.head < len(rr.q) && rr.q[rr.head].to <= rev {
		rr.head++
	}
	switch {
	case rr.head == len(rr.q):
		rr.q, rr.head = rr.q[:0], 0
	case rr.head > 64 && rr.head > len(rr.q)/2:
		rr.q = append(rr.q[:0], rr.q[rr.head:]...)
		rr.head = 0
	}
}

// sharedRanges are the revisions of the committer's writes, published
// before each of its commits and taken by the loop when it reads changes.
type sharedRanges struct {
	mu     sync.Mutex
	ranges []written
}

func (s *sharedRanges) add(wr written) {
	s.mu.Lock()
	s.ranges = append(s.ranges, wr)
	s.mu.Unlock()
}

// moveTo hands the published ranges over to rr.
func (s *sharedRanges) moveTo(rr *revRanges) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, wr := range s.ranges {
		rr.add(wr)
	}
	s.ranges = s.ranges[:0]
}

// writeStatus stores w's status if, and only if, this reconciler's status
// in the current object is still the one the request expects, whatever
// else changed (the data, another reconciler's status in a StatusSet),
// and, for a fenced write, this replica owns the key. Otherwise it says
// what it found instead (afterWrite acts on it). When the object is
// exactly the one the operation saw, the operation's clone is written,
// keeping what Update set on it.
func (r *reconciler[Obj]) writeStatus(wtxn statedb.WriteTxn, w *statusWrite[Obj]) writeOutcome {
	if w.fenced && !r.ownsKey(w.key) {
		return writeNotOwned
	}
	target, err := w.target, error(nil)
	if !w.hasTarget {
		target, err = r.clone(w.obj)
	}
	if err == nil {
		obj := r.cfg.SetObjectStatus(target, w.status)
		if outcome, done := r.swap(wtxn, w, w.rev, obj); done {
			return outcome
		}
	}
	cur, rev, found := r.cfg.Table.Get(wtxn, r.queryOf(w.obj))
	if !found {
		return writeSuperseded // deleted: the delete follows
	}
	if st := r.cfg.GetObjectStatus(cur); !sameStatus(st, w.expect) {
		w.current = st
		if st.IsPendingOrRefreshing() || !st.Kind.Valid() || st.Kind == StatusKindUnset {
			// A newer request (Unset: to withdraw this one): the
			// change iterator delivers it.
			return writeSuperseded
		}
		return writeOwed
	}
	clone, err := r.clone(cur)
	if err != nil {
		return writeSuperseded // reported when the operation's own clone fails
	}
	merged := r.cfg.SetObjectStatus(clone, w.status)
	if outcome, done := r.swap(wtxn, w, rev, merged); done {
		return outcome
	}
	return writeSuperseded
}

// swap writes obj, which SetObjectStatus returned, over the object at
// revision rev. done is false when that object is no longer there at rev
// but its key is (the caller looks at what replaced it). The key is
// computed only when the swap fails: revisions are unique across the
// table, so a swap that succeeded replaced this very object, which has
// w's key; and statedb writes nothing, and reports no error, for an
// object without a primary key (hadOld false).
func (r *reconciler[Obj]) swap(wtxn statedb.WriteTxn, w *statusWrite[Obj], rev statedb.Revision, obj Obj) (writeOutcome, bool) {
	_, hadOld, err := r.cfg.Table.CompareAndSwap(wtxn, rev, obj)
	switch {
	case err == nil && hadOld:
		return writeLanded, true
	case err == nil, r.keyOf(obj) != w.key:
		return writeKeyChanged, true
	case !errors.Is(err, statedb.ErrRevisionNotEqual):
		return writeSuperseded, true // deleted meanwhile: the delete follows
	}
	return 0, false
}
