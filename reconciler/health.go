package reconciler

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/converge-go/converge/reconciler/internal/clock"

	"github.com/cilium/hive/cell"
)

// maxHealthErrors bounds the errors joined into the Degraded health report.
const maxHealthErrors = 10

// healthState is what was last reported in health, and the recent errors.
type healthState struct {
	dirty         bool      // the failing set changed since the last report
	last          string    // the last health message, to skip repeats
	lastCount     int       // the object count and suspension in last, when it
	lastSuspended bool      // is an OK or Suspended message: a report that
	lastPlain     bool      // would repeat it costs no formatting
	lastDegraded  time.Time // when the last Degraded report was built
	recent        recentErrors
}

func newHealthState() healthState {
	return healthState{dirty: true}
}

// recentErrors keeps the last few failures, newest last, for Status().
// Keys are made printable only when listed: failures can come by the
// hundred thousand.
type recentErrors struct {
	buf  [maxRecentErrors]recentError
	next int
	n    int
}

type recentError struct {
	key, err string
	at       time.Time
}

// maxRecentErrors bounds the errors Status() reports.
const maxRecentErrors = 16

func (r *recentErrors) add(e recentError) {
	r.buf[r.next] = e
	r.next = (r.next + 1) % maxRecentErrors
	r.n = min(r.n+1, maxRecentErrors)
}

// list returns the recent errors, newest first.
func (r *recentErrors) list() []ObjectError {
	out := make([]ObjectError, 0, r.n)
	for i := 1; i <= r.n; i++ {
		e := r.buf[(r.next-i+maxRecentErrors)%maxRecentErrors]
		out = append(out, ObjectError{Key: printableKey(e.key), Error: e.err, At: e.at})
	}
	return out
}

// firstErrors returns the failures of the smallest keys of failing, at
// most n, in key order.
func firstErrors(n int, failing iter.Seq2[string, string]) []error {
	keys := make([]string, 0, n+1)
	msgs := map[string]string{}
	for k, msg := range failing {
		if len(keys) == n && k >= keys[n-1] {
			continue
		}
		i, _ := slices.BinarySearch(keys, k)
		keys = slices.Insert(keys, i, k)
		msgs[k] = msg
		if len(keys) > n {
			delete(msgs, keys[n])
			keys = keys[:n]
		}
	}
	errs := make([]error, len(keys))
	for i, k := range keys {
		errs[i] = fmt.Errorf("%s: %s", printableKey(k), msgs[k])
	}
	return errs
}

// printableKey shows a primary key: as text when it is printable, else
// in hex.
func printableKey(k string) string {
	for _, r := range k {
		if r < 0x20 || r > 0x7e {
			return fmt.Sprintf("%x", k)
		}
	}
	return k
}

// healthRecomputeEvery bounds how often a Degraded report listing the
// errors is rebuilt while many objects fail: building it walks the failing
// set, and a retry storm of 100,000 objects changes that set every round.
const (
	healthRecomputeEvery = time.Second
	healthCheapFailing   = 1000 // below this, rebuild at once
)

// wholeError is an error of the whole target rather than of one object:
// the last prune's, or the last Sync's.
type wholeError struct {
	op  string // "prune", "sync"
	err error
}

// failingSet is what a health report needs of the failing objects: how
// many, and the first n of them by key, with their errors.
type failingSet struct {
	n     int
	first func(n int) []error
}

// reportFailing publishes health: Degraded with the first errors while
// objects fail or the whole target does, else OK (or Suspended) with the
// count. While many objects fail, a changed Degraded report is rebuilt at
// most every healthRecomputeEvery: later fires when it is due.
func (h *healthState) reportFailing(health cell.Health, now time.Time, objects int, suspended bool, whole wholeError, later *clock.Timer, failing failingSet) {
	var msg string
	var err error
	switch {
	case failing.n > 0 || whole.err != nil:
		wasDegraded := strings.HasPrefix(h.last, "Degraded")
		if wasDegraded && h.dirty && failing.n > healthCheapFailing {
			if at := h.lastDegraded.Add(healthRecomputeEvery); at.After(now) {
				later.ArmAt(at) // report the change a little later
				return
			}
		}
		if h.dirty || !wasDegraded {
			h.lastPlain = false
			h.lastDegraded = now
			errs := failing.first(maxHealthErrors)
			if whole.err != nil {
				errs = append([]error{fmt.Errorf("%s: %w", whole.op, whole.err)}, errs...)
			}
			if more := failing.n - min(failing.n, maxHealthErrors); more > 0 {
				errs = append(errs, fmt.Errorf("and %d more", more))
			}
			err = errors.Join(errs...)
			msg = fmt.Sprintf("Degraded: %d object(s) failing", failing.n)
			if whole.err != nil {
				msg += ", " + whole.op + " failed"
			}
			h.dirty = false
			h.last = msg
			health.Degraded(msg[len("Degraded: "):], err)
		}
		return
	case h.lastPlain && objects == h.lastCount && suspended == h.lastSuspended:
		h.dirty = false
		return
	case suspended:
		msg = fmt.Sprintf("Suspended, %d object(s)", objects)
	default:
		msg = fmt.Sprintf("OK, %d object(s)", objects)
	}
	h.dirty = false
	h.lastPlain, h.lastCount, h.lastSuspended = true, objects, suspended
	if msg != h.last {
		h.last = msg
		health.OK(msg)
	}
}
