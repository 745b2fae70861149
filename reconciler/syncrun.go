package reconciler

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// Starting a Sync and running it on its own goroutine.

// startSync hands every outstanding request, up to a fresh snapshot, to a
// Sync on its own goroutine.
func (s *syncLoop[Obj]) startSync(ctx context.Context, now time.Time) {
	txn := s.db.ReadTxn()
	s.read(txn, now) // the changes handed over are exactly the snapshot's
	if s.readTo < s.cfg.Table.Revision(txn) && s.unreadWaits < maxUnreadWaits {
		// The snapshot holds a change the iterator did not return: its
		// commit published the data and is closing the watch channels
		// right now. Start once it is read, so that the Sync's changes
		// cover its snapshot (the loop wakes when the channel closes).
		s.unreadWaits++
		s.next.Arm(time.Millisecond)
		return
	}
	s.unreadWaits = 0
	taken, id := s.work.takeAll(s.taken[:0], now)
	run := &syncRun[Obj]{txn: txn, id: id, taken: taken, all: !s.synced, full: s.fullWanted,
		failures: s.failures, start: now}
	run.changes = make([]Change[Obj], 0, len(taken))
	for _, r := range taken {
		if r.deleted || !run.all {
			run.changes = append(run.changes, Change[Obj]{Object: r.obj, Revision: r.rev, Deleted: r.deleted})
		}
	}
	s.firstChange, s.lastChange, s.fullWanted = time.Time{}, time.Time{}, false
	s.lastStart = now
	s.full.Disarm()
	s.running = run
	s.dirty = true
	s.wg.Add(1)
	go s.execute(ctx, run)
}

// execute runs one Sync, guarded like every operation: OperationTimeout,
// and a panic becomes an error.
func (s *syncLoop[Obj]) execute(ctx context.Context, run *syncRun[Obj]) {
	defer s.wg.Done()
	loopCtx := ctx
	if run.all {
		// Nothing is known of what an earlier run applied: every object.
		for obj, rev := range s.cfg.Table.All(run.txn) {
			run.changes = append(run.changes, Change[Obj]{Object: obj, Revision: rev})
		}
	}
	slices.SortFunc(run.changes, func(a, b Change[Obj]) int { return cmp.Compare(a.Revision, b.Revision) })
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
	run.err = s.call(ctx, func() { s.overrun(loopCtx, run) }, OpSync, "", run.failures, func(ctx context.Context) error {
		return s.cfg.SyncOperations.Sync(ctx, run.txn, s.cfg.Table.All(run.txn), slices.Values(run.changes))
	})
	run.dur = time.Since(start)
	s.done <- run // never blocks: one Sync at a time
}

// overrun is called when run passed OperationTimeout without returning.
// It keeps its place (no second Sync may run beside it); health says so
// until it returns. The signal names its run: the loop may take run's
// result first (call returns ErrTimeout then too) and start the next
// Sync before it reads the signal, which must not fail that one. The
// loop always reads the signals, until it stops.
func (s *syncLoop[Obj]) overrun(ctx context.Context, run *syncRun[Obj]) {
	select {
	case s.overdue <- run:
	case <-ctx.Done():
	}
}
