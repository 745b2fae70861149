package retry

import (
	"log/slog"
	"time"

	"golang.org/x/time/rate"
)

// Failure logging. The first failure of an object, and every change of its
// error, is logged at Warn with the key, the operation and the error; the
// same error again is logged at most once per failureLogRepeat for that
// object. Across objects at most failureLogRate lines a second are written
// (bursts of failureLogBurst); the lines held back are counted and the
// next line written says how many.
const (
	failureLogRepeat = time.Minute
	failureLogRate   = 10
	failureLogBurst  = 20
)

// FailureLog decides which failures are logged. Each object keeps its last
// logged error and when (Write's lastErr and lastAt).
type FailureLog struct {
	log        *slog.Logger
	limit      *rate.Limiter
	suppressed int
}

// NewFailureLog returns a failure log writing to log.
func NewFailureLog(log *slog.Logger) FailureLog {
	return FailureLog{log: log, limit: rate.NewLimiter(failureLogRate, failureLogBurst)}
}

// Write logs msg for key (already printable; "" for none) unless it
// repeats *lastErr within failureLogRepeat of *lastAt or the global rate
// is spent.
func (f *FailureLog) Write(lastErr *string, lastAt *time.Time, key, op, msg string, attempt int, now time.Time) {
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
		args = append(args, "key", key)
	}
	if f.suppressed > 0 {
		args = append(args, "suppressed", f.suppressed)
		f.suppressed = 0
	}
	f.log.Warn("Operation failed", args...)
}
