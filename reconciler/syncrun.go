package reconciler

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/cilium/statedb"
)

// Starting a Sync and running it on its own goroutine.

// startSync hands every pending change, up to a fresh snapshot, to a Sync
// on its own goroutine.
func (s *syncLoop[Obj]) startSync(ctx context.Context, now time.Time) {
	txn := s.db.ReadTxn()
	s.read(txn, now) // the changes handed over are exactly the snapshot's
	if s.pulledTo < s.cfg.Table.Revision(txn) && s.unreadWaits < maxUnreadWaits {
		// The snapshot holds a change the iterator did not return: its
		// commit published the data and is closing the watch channels
		// right now. Start once it is read, so that the Sync's changes
		// cover its snapshot (the loop wakes when the channel closes).
		s.unreadWaits++
		s.next.arm(time.Millisecond)
		return
	}
	s.unreadWaits = 0
	run := &syncRun[Obj]{txn: txn, entries: s.pending, full: s.fullWanted, untried: s.untried,
		failures: s.failures, start: now, minFloor: s.pulledTo, retryFloor: s.retryFloor}
	if s.hasFloor {
		run.minFloor = min(run.minFloor, s.firstFloor)
	}
	// Sized for a storm's next batch, not for a first Sync of the whole table.
	s.pending = make(map[string]*syncEntry[Obj], min(len(run.entries), s.cfg.RoundSize))
	s.firstChange, s.lastChange, s.retryAt, s.fullWanted = time.Time{}, time.Time{}, time.Time{}, false
	s.untried, s.hasFloor, s.retryFloor = 0, false, ^statedb.Revision(0)
	s.lastStart = now
	s.full.disarm()
	s.running = run
	s.dirty = true
	s.wg.Add(1)
	go s.execute(ctx, run)
}

// execute runs one Sync, guarded like every operation: OperationTimeout,
// and a panic becomes an error.
func (s *syncLoop[Obj]) execute(ctx context.Context, run *syncRun[Obj]) {
	defer s.wg.Done()
	changes := make([]Change[Obj], 0, len(run.entries))
	for _, e := range run.entries {
		changes = append(changes, Change[Obj]{Object: e.obj, Revision: e.rev, Deleted: e.deleted})
	}
	slices.SortFunc(changes, func(a, b Change[Obj]) int { return cmp.Compare(a.Revision, b.Revision) })
	if own := s.cfg.Ownership; own != nil {
		opCtx, release, ok := own.Acquire(ctx, nil)
		if !ok {
			run.err = RetryAfter(0, nil) // no longer leading: nothing ran, nothing failed
			s.done <- run
			return
		}
		defer release()
		ctx = opCtx
	}
	start := time.Now()
	run.err = s.call(ctx, s.overrun, OpSync, "", run.failures, func(ctx context.Context) error {
		return s.cfg.SyncOperations.Sync(ctx, run.txn, s.cfg.Table.All(run.txn), slices.Values(changes))
	})
	run.dur = time.Since(start)
	s.done <- run // never blocks: one Sync at a time
}

// overrun is called when the Sync passed OperationTimeout without
// returning. It keeps its place (no second Sync may run beside it); health
// says so until it returns.
func (s *syncLoop[Obj]) overrun() {
	select {
	case s.overdue <- struct{}{}:
	default:
	}
}
