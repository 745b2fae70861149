package reconciler

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Match them with errors.Is; the errors the reconciler
// returns wrap them with context.
var (
	// ErrInvalidConfig is wrapped by every error New and Register return for
	// a bad Config. The message names the offending field.
	ErrInvalidConfig = errors.New("invalid reconciler config")

	// ErrPanic is wrapped by the error an object (or a prune) fails with when
	// its operation panicked. The message says which operation and with what.
	ErrPanic = errors.New("operation panicked")

	// ErrTimeout is wrapped by the error an object fails with when its
	// operation ran past Config.OperationTimeout.
	ErrTimeout = errors.New("operation timed out")

	// ErrRetriesExhausted is wrapped by the error an object fails with once
	// Config.MaxRetries consecutive attempts have failed. Like a Permanent
	// error it is not retried until the object changes or is refreshed.
	ErrRetriesExhausted = errors.New("retry budget spent")

	// ErrDependencyCycle is wrapped by the error an object is given up on
	// with when it is on a cycle of Config.DependsOn: the message names
	// the cycle (its first keys). It is never attempted; a change of any
	// key of the cycle tries the others again.
	ErrDependencyCycle = errors.New("dependency cycle")

	// ErrUnknownStatusKind is wrapped by every error that rejects a status
	// kind: a name that is not one of "Pending", "Refreshing", "Done" or
	// "Error", a JSON value that is not such a string (numbers and null
	// included), a YAML node that is not such a string scalar, an
	// out-of-range StatusKind being marshalled, and an index key that
	// encodes no kind.
	ErrUnknownStatusKind = errors.New("unknown status kind")

	// ErrMalformedStatusSet is wrapped by every error that rejects a
	// serialized StatusSet: a value that is not an object, an unknown or
	// repeated field, a null where an object or number is required, a
	// status name given twice, or (when marshalling) a status name that is
	// not valid UTF-8 and so could not be read back.
	ErrMalformedStatusSet = errors.New("malformed status set")
)

// permanentError marks an error as not worth retrying.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying: the object is marked Error
// with err's message and is not retried until it changes or is refreshed.
// It still counts as failing in health and metrics. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// IsPermanent reports whether err, or any error it wraps, was marked with
// Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// retryAfterError carries an operation's own idea of when to come back.
type retryAfterError struct {
	after time.Duration
	err   error
}

func (e *retryAfterError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("not ready, retry after %s", e.after)
	}
	return e.err.Error()
}
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter is returned by an operation to say "retry this object no sooner
// than d", as a remote API's 429 with Retry-After asks. With a non-nil err
// the object is marked Error with err's message and retried after d instead
// of after the exponential backoff; the next failure without RetryAfter
// resumes the normal backoff sequence.
//
// RetryAfter(d, nil) means "not ready yet, not a failure": the object stays
// Pending, is not counted as failing in health or metrics, and is retried
// after d. A d below zero is treated as zero.
func RetryAfter(d time.Duration, err error) error {
	return &retryAfterError{after: max(d, 0), err: err}
}

// retryAfter returns the delay requested with RetryAfter, if any.
func retryAfter(err error) (time.Duration, bool) {
	if err == nil {
		return 0, false // without allocating for errors.As
	}
	var ra *retryAfterError
	if errors.As(err, &ra) {
		return ra.after, true
	}
	return 0, false
}

// isDeferral reports whether err is RetryAfter(d, nil): not a failure.
func isDeferral(err error) bool {
	if err == nil {
		return false // without allocating for errors.As: most results are nil
	}
	var ra *retryAfterError
	return errors.As(err, &ra) && ra.err == nil
}
