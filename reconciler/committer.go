package reconciler

import (
	"context"
	"runtime"
	"time"
)

// maxOutJobs is how many commits may have their writes out on the
// committer at once: one being written and one queued behind it, so the
// committer goes from one write transaction straight to the next while
// the loop finishes the first and picks up the next round.
const maxOutJobs = 2

// commit plans a commit of the finished results and makes its writes.
// With async set (more changes wait to be picked up) the writes go out to
// the committer goroutine and the loop goes on: it reads and runs the next
// round while the write transaction waits for and holds the table's lock,
// which for fast operations is most of a round's time. The keys stay busy
// until the writes come back and finish runs. Otherwise the writes are
// made right here, sparing a lone change the two hand-offs. commit reports
// whether the commit finished here.
func (l *loop[Obj]) commit(ctx context.Context, now time.Time, ts *loopTimers, async bool) bool {
	job := l.plan(now)
	// While a job is out, the next ones follow it even with nothing to
	// write, so that commits finish in the order they were planned (a
	// prune's result must be finished after the deletes taken before it).
	if l.outJobs > 0 || (async && len(job.writes) > 0) {
		l.outJobs++
		l.outItems += len(job.items)
		l.toCommitter <- job // never blocks: it holds maxOutJobs
		return false
	}
	l.write(ctx, job)
	l.finish(job, ts)
	if len(job.writes) > 0 {
		// The writes woke whoever waits for these objects (a
		// WaitUntilReconciled, a watch on the object); the scheduler
		// queued it to run on this thread after the loop. Let it run
		// before the report and the rest of the step: under a trickle of
		// changes that halves the p99 of change-to-Done.
		runtime.Gosched()
	}
	return true
}

// landed finishes a commit whose writes came back from the committer.
func (l *loop[Obj]) landed(job *commitJob[Obj], ts *loopTimers) {
	l.outJobs--
	l.outItems -= len(job.items)
	l.finish(job, ts)
}

// committer makes the writes of the jobs the loop sends it, in the order
// sent, and hands each back. It ends when the loop closes toCommitter.
func (l *loop[Obj]) committer(ctx context.Context) {
	defer l.wg.Done()
	for job := range l.toCommitter {
		l.write(ctx, job)
		l.fromCommitter <- job // never blocks: it holds maxOutJobs
	}
}
