package reconciler

import (
	"log/slog"
	"time"

	"golang.org/x/time/rate"
)

// Failure logging. The first failure of an object, and every change of
// its error, is logged at Warn with the key, the operation and the error;
// the same error again is logged at most once per failureLogRepeat for
// that object. Across objects at most failureLogRate lines a second are
// written (bursts of failureLogBurst); the lines held back are counted and
// the next line written says how many.
const (
	failureLogRepeat = time.Minute
	failureLogRate   = 10
	failureLogBurst  = 20
)

// failureLog decides which failures are logged.
type failureLog struct {
	log        *slog.Logger
	limit      *rate.Limiter
	suppressed int
}

func newFailureLog(log *slog.Logger) failureLog {
	return failureLog{log: log, limit: rate.NewLimiter(failureLogRate, failureLogBurst)}
}

// write logs msg for key unless it repeats *lastErr within
// failureLogRepeat of *lastAt or the global rate is spent.
func (f *failureLog) write(lastErr *string, lastAt *time.Time, key string, op Op, msg string, attempt int, now time.Time) {
	if msg == *lastErr && now.Sub(*lastAt) < failureLogRepeat {
		return
	}
	if !f.limit.AllowN(now, 1) {
		f.suppressed++
		return
	}
	*lastErr, *lastAt = msg, now
	args := []any{"op", op, "error", msg, "attempt", attempt}
	if key != "" {
		args = append(args, "key", printableKey(key))
	}
	if f.suppressed > 0 {
		args = append(args, "suppressed", f.suppressed)
		f.suppressed = 0
	}
	f.log.Warn("Operation failed", args...)
}
