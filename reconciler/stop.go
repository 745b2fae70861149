package reconciler

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cilium/hive/cell"
)

// How a run stops. The loop's context ends when the hive stops its job:
// operations in flight see their context cancelled, nothing new starts,
// and nothing is committed afterwards. The run then waits for the
// operations still running, but only so long (stopWait): the hive stops
// its jobs one after the other, and one operation that ignores its
// context must not hold up the others, nor the agent's exit. What it gives
// up on is logged by key; such an operation may still act on the target
// until it returns, and its goroutine outlives Stop.

// stopGrace is how long past OperationTimeout a stopping run waits for an
// operation, which saw its context cancelled when the stop began.
const stopGrace = 100 * time.Millisecond

// stopHook learns the context the hive stops with: its deadline bounds
// how long the run waits for its operations. A pre-stop hook (as the job
// registry's is) appended after the job registry's is stopped before it,
// so the context is known before the job's context ends.
type stopHook struct {
	ctx atomic.Pointer[context.Context]
}

func (*stopHook) Start(cell.HookContext) error { return nil }

func (h *stopHook) Stop(ctx cell.HookContext) error {
	c := context.Context(ctx)
	h.ctx.Store(&c)
	return nil
}

// PreStopHookMarker has the hive stop the hook before the jobs.
func (*stopHook) PreStopHookMarker() {}

var _ cell.PreStopHook = (*stopHook)(nil)

// awaitStop waits, as a run stops, for its operations still running:
// wait waits until its context ends and returns what still runs then.
// It gives up a little before the hive's stop deadline, when the hive's
// stop is cancelled, or, with OperationTimeout, that long plus stopGrace
// after the stop began; it logs what it gave up on. Without a deadline,
// a timeout or the hook (a reconciler made after the hive started), it
// waits as long as its operations run, and says, past stopGrace, which
// it waits for.
func (r *reconciler[Obj]) awaitStop(wait func(context.Context) []string) {
	now := time.Now()
	var stop context.Context
	if p := r.stopping.ctx.Load(); p != nil {
		stop = *p
	}
	by, bounded := r.stopBy(stop, now)
	if !bounded {
		grace, cancel := context.WithTimeout(context.Background(), stopGrace)
		left := wait(grace)
		cancel()
		if left == nil {
			return
		}
		r.log.Warn("Stopping waits, with no deadline, for operations that ignore their context: "+
			"set OperationTimeout, or make the reconciler before the hive starts, for Stop to give up on them",
			"operations", left)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if bounded {
		ctx, cancel = context.WithDeadline(context.Background(), by)
	}
	defer cancel()
	if stop != nil {
		defer context.AfterFunc(stop, cancel)()
	}
	for _, what := range wait(ctx) {
		r.log.Error("Stopped without waiting for an operation that ignores its context; it may still act on the target until it returns",
			"operation", what)
	}
}

// stopBy is when a stopping run gives up on its operations: a little
// before the stop deadline (the job registry stops the jobs after this
// one only if the stop context has not ended by then), or OperationTimeout
// plus stopGrace after now, whichever comes first. bounded is false when
// there is neither.
func (r *reconciler[Obj]) stopBy(stop context.Context, now time.Time) (by time.Time, bounded bool) {
	if d := r.cfg.OperationTimeout; d > 0 {
		by, bounded = now.Add(d+stopGrace), true
	}
	if stop == nil {
		return by, bounded
	}
	if dl, ok := stop.Deadline(); ok {
		dl = dl.Add(-min(dl.Sub(now)/10, time.Second))
		if !bounded || dl.Before(by) {
			by, bounded = dl, true
		}
	}
	return by, bounded
}

// describeTask says which operation a task is, for the log of a stop
// that gave up on it.
func describeTask[Obj any](t *task[Obj], running time.Duration) string {
	switch {
	case t.op == OpPrune:
		return fmt.Sprintf("Prune, running for %s", roundDur(running))
	case len(t.entries) > 0:
		return fmt.Sprintf("%s of %d objects (the first %q), running for %s", t.op, len(t.entries),
			printableKey(t.entries[0].key), roundDur(running))
	}
	return fmt.Sprintf("%s of %q, running for %s", t.op, printableKey(t.one.key), roundDur(running))
}

// awaitSync waits, as a whole-set run stops, for the Sync still running,
// if any (awaitStop).
func (s *syncLoop[Obj]) awaitSync() {
	run := s.running
	if run == nil {
		return
	}
	s.awaitStop(func(wait context.Context) []string {
		select {
		case <-s.done:
			return nil
		case <-wait.Done():
			return []string{fmt.Sprintf("Sync, running for %s", roundDur(time.Since(run.start)))}
		}
	})
}
