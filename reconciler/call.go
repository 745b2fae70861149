package reconciler

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// call runs one operation with the operation timeout and turns a panic into
// an error wrapping ErrPanic. When the deadline passes while fn still runs,
// overrun is called (on the timer's goroutine; call returns only once it
// has): the loop counts the attempt as failed from then on, and call
// returns ErrTimeout whatever fn returns, nil included, so that a late
// result reads the same whichever of the two the loop sees first. The
// stack of a panic is logged when a key first panics (failures == 0), not
// on every retry.
func (r *reconciler[Obj]) call(ctx context.Context, overrun func(), op Op, key string, failures int, fn func(context.Context) error) (err error) {
	if r.cfg.OperationTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.cfg.OperationTimeout)
		defer cancel()
		overran, decided := false, make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			defer close(decided)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				overran = true
				overrun()
			}
		})
		// Deferred before the recover below, so it runs after it: it
		// has the last word on err.
		defer func() {
			if !stop() {
				<-decided // overrun ran (or runs): let it finish deciding
			}
			if overran {
				err = timeoutError(op, r.cfg.OperationTimeout)
			}
		}()
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s: %v", ErrPanic, op, p)
			if failures == 0 {
				args := []any{"op", op, "panic", p, "stack", string(debug.Stack())}
				if key != "" {
					args = append(args, "key", printableKey(key))
				}
				r.log.Error("Operation panicked; recovered", args...)
			}
		}
	}()
	err = safeErr(op, fn(ctx))
	if err != nil && r.cfg.OperationTimeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// Failed at its deadline, most often of it, before overrun
		// could run: the same error as if the loop had given up first.
		err = timeoutError(op, r.cfg.OperationTimeout)
	}
	return err
}

// timeoutError is the error of an attempt that ran past OperationTimeout.
func timeoutError(op Op, after time.Duration) error {
	return fmt.Errorf("%w after %s: %s", ErrTimeout, after, op)
}

// safeErr returns err if it can be used safely: its message and its chain
// of wrapped errors can be read without panicking. A typed nil pointer in an
// error interface is the usual offender; it becomes an error wrapping
// ErrPanic, so one bad error value fails its object instead of the agent.
func safeErr(op Op, err error) (out error) {
	if err == nil {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			out = fmt.Errorf("%w: %s returned an error that panics when read (%T): %v", ErrPanic, op, err, p)
		}
	}()
	_ = err.Error()
	_, _ = retryAfter(err)
	_ = IsPermanent(err)
	_ = errors.Is(err, ErrPanic)
	return err
}

// clone copies obj for an operation. A CloneObject that returns the object
// itself (for pointer types) would let the operation and the status write
// mutate an object the table's snapshots share: refuse it.
func (r *reconciler[Obj]) clone(obj Obj) (Obj, error) {
	c := r.cfg.CloneObject(obj)
	if r.pointerObjects && c == obj {
		var zero Obj
		return zero, fmt.Errorf("%w: Config.CloneObject returned the object itself; it must return a copy", ErrInvalidConfig)
	}
	return c, nil
}

// classify maps an operation's error to its metrics result. failures is
// the object's consecutive failures before this attempt, or -1 for a prune,
// which has no retry budget.
func (r *reconciler[Obj]) classify(err error, failures int) Result {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, ErrInvalidConfig):
		return ResultPermanent
	case isDeferral(err):
		return ResultDeferred
	case errors.Is(err, ErrPanic):
		return ResultPanic
	case IsPermanent(err):
		return ResultPermanent
	case r.cfg.MaxRetries > 0 && failures >= 0 && failures+1 >= r.cfg.MaxRetries:
		return ResultExhausted
	case errors.Is(err, ErrTimeout):
		return ResultTimeout
	default:
		return ResultError
	}
}

// failure wraps the error of an attempt after failures earlier ones for
// the status, and reports whether the object is given up on (Permanent, a
// misconfiguration, or MaxRetries spent).
func (r *reconciler[Obj]) failure(err error, failures int) (error, bool) {
	if IsPermanent(err) || errors.Is(err, ErrInvalidConfig) {
		return err, true
	}
	if r.cfg.MaxRetries > 0 && failures+1 >= r.cfg.MaxRetries {
		return fmt.Errorf("%w after %d attempts: %w", ErrRetriesExhausted, failures+1, err), true
	}
	return err, false
}

// resultRank orders results from best to worst, for reporting a batch by
// its worst entry.
var resultRank = [...]Result{ResultOK, ResultDeferred, ResultError, ResultTimeout, ResultPermanent, ResultExhausted, ResultPanic}

func rankOf(r Result) int {
	for i, x := range resultRank {
		if x == r {
			return i
		}
	}
	return len(resultRank) - 1
}

// worse returns the worse of two results.
func worse(a, b Result) Result {
	if rankOf(b) > rankOf(a) {
		return b
	}
	return a
}
