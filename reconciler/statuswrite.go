package reconciler

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler/internal/revs"
)

// The status write rule, on the committer goroutine (or the loop's, for a
// commit that is not pipelined): a commit's statuses are written in one
// write transaction (writeAll), each only while the table still holds the
// status its request expects (writeStatus, swap). What a write found is
// handed back to the loop, which settles each request by it (commit.go).

// writeStatus stores w's status if, and only if, this reconciler's status
// in the current object is still the one the request expects, whatever
// else changed (the data, another reconciler's status in a StatusSet),
// and, for a fenced write, this replica owns the key. Otherwise it says
// what it found instead (settle acts on it). When the object is exactly
// the one the operation saw, the operation's clone is written, keeping
// what Update set on it.
func (c *committer[Obj]) writeStatus(wtxn statedb.WriteTxn, w *statusWrite[Obj]) writeOutcome {
	if w.fenced && !c.ownsKey(w.key) {
		return writeNotOwned
	}
	if outcome, done := c.swap(wtxn, w, w.rev, c.cfg.SetObjectStatus(w.target, w.status)); done {
		return outcome
	}
	cur, rev, found := c.cfg.Table.Get(wtxn, c.queryOf(w.obj))
	if !found {
		return writeSuperseded // deleted: the delete follows
	}
	if st := c.cfg.GetObjectStatus(cur); !sameStatus(st, w.expect) {
		w.current = st
		if st.IsPendingOrRefreshing() || !st.Kind.Valid() || st.Kind == StatusKindUnset {
			return writeSuperseded // a newer request (Unset: to withdraw this one) follows
		}
		return writeOwed
	}
	clone, err := c.clone(cur)
	if err != nil {
		clone, _ = shallowCopy(cur) // the Error that says so, written all the same
	}
	if outcome, done := c.swap(wtxn, w, rev, c.cfg.SetObjectStatus(clone, w.status)); done {
		return outcome
	}
	return writeSuperseded
}

// swap writes obj, which SetObjectStatus returned, over the object at
// revision rev. done is false when that object is no longer there at rev
// but its key is (the caller looks at what replaced it). The key is
// computed only when the swap fails: revisions are unique across the
// table, so a swap that succeeded replaced this very object; and statedb
// writes nothing, and reports no error, for an object without a primary
// key (hadOld false).
func (c *committer[Obj]) swap(wtxn statedb.WriteTxn, w *statusWrite[Obj], rev statedb.Revision, obj Obj) (writeOutcome, bool) {
	_, hadOld, err := c.cfg.Table.CompareAndSwap(wtxn, rev, obj)
	switch {
	case err == nil && hadOld:
		return writeLanded, true
	case err == nil, c.keyOf(obj) != w.key:
		return writeKeyChanged, true
	case !errors.Is(err, statedb.ErrRevisionNotEqual):
		return writeSuperseded, true // deleted meanwhile: the delete follows
	}
	return 0, false
}

// yieldEvery is how many status writes a long write transaction makes
// between yields of its processor, when there are more workers than
// processors: operations whose I/O completes meanwhile run first instead
// of idling behind the transaction (benchmarks/README.md, slow-1ms c256).
const yieldEvery = 64

// writeAll makes the writes in one write transaction and returns what it
// wrote. When ctx has ended it aborts and reports false: nothing is
// written after Stop. Right before the commit, own learns the revisions
// written, so that whoever reads the changes after it recognizes them as
// this reconciler's own. It touches nothing but the table, own and the
// writes' outcomes: it runs on the committer goroutine too.
func (c *committer[Obj]) writeAll(ctx context.Context, writes []statusWrite[Obj], own interface{ Add(revs.Range) }) (time.Time, bool) {
	if len(writes) == 0 {
		return time.Time{}, true
	}
	yield := c.cfg.Concurrency > runtime.GOMAXPROCS(0)
	wtxn := c.db.WriteTxn(c.cfg.Table)
	from := c.cfg.Table.Revision(wtxn) + 1
	for i := range writes {
		writes[i].outcome = c.writeStatus(wtxn, &writes[i])
		if yield && i%yieldEvery == yieldEvery-1 {
			runtime.Gosched()
		}
	}
	if ctx.Err() != nil {
		wtxn.Abort()
		return time.Time{}, false
	}
	own.Add(revs.Range{From: from, To: c.cfg.Table.Revision(wtxn)})
	wtxn.Commit()
	return time.Now(), true
}
