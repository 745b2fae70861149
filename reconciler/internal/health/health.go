// Package health builds the reconciler's health reports: Degraded with the
// first errors (by key) while objects or the whole target fail, OK or
// Suspended with the object count otherwise, without rebuilding a report
// that would not change, and at most once a second while a failing set of
// thousands changes every round. It also keeps the latest failures for
// the status snapshot.
package health

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/cilium/hive/cell"

	"github.com/converge-go/converge/reconciler/internal/clock"
)

// MaxErrors bounds the errors joined into a Degraded report; MaxRecent
// those Recent keeps.
const (
	MaxErrors = 10
	MaxRecent = 16
)

// While many objects fail, a changed Degraded report is rebuilt at most
// every recomputeEvery: building it walks the failing set, and a retry
// storm of 100,000 objects changes that set every round.
const (
	recomputeEvery = time.Second
	cheapFailing   = 1000 // below this, rebuild at once
)

// Whole is an error of the whole target rather than of one object: the
// last prune's, or the last Sync's; Op names it ("prune", "sync",
// "status").
type Whole struct {
	Op  string
	Err error
	// What, when set, says it in the report's first line instead of
	// "<Op> failed" (as for keys blocked on their dependencies, which is
	// no failure).
	What string
}

// Failing is what a report needs of the failing objects: how many, and
// the first n of them by key with their errors (nil when there are none).
type Failing struct {
	N     int
	First func(n int) []error
}

// State is what was last reported, and the recent errors.
type State struct {
	// Dirty is set when the failing set changed since the last report.
	Dirty         bool
	last          string    // the last message, to skip repeats
	lastCount     int       // the object count and suspension in last, when it
	lastSuspended bool      // is an OK or Suspended message: a report that
	lastPlain     bool      // would repeat it costs no formatting
	lastDegraded  time.Time // when the last Degraded report was built
	Recent        Recent
}

// New returns a state whose first report is made.
func New() State { return State{Dirty: true} }

// Report publishes health: Degraded with the first errors while objects
// fail or the whole target does, else OK (or Suspended) with the count.
// While many objects fail, a changed Degraded report is rebuilt at most
// every second: later fires when it is due.
func (h *State) Report(health cell.Health, now time.Time, objects int, suspended bool, whole Whole, later *clock.Timer, failing Failing) {
	if failing.N > 0 || whole.Err != nil {
		wasDegraded := strings.HasPrefix(h.last, "Degraded")
		if wasDegraded && h.Dirty && failing.N > cheapFailing {
			if at := h.lastDegraded.Add(recomputeEvery); at.After(now) {
				later.ArmAt(at) // report the change a little later
				return
			}
		}
		if h.Dirty || !wasDegraded {
			h.lastPlain, h.lastDegraded, h.Dirty = false, now, false
			var errs []error
			if failing.First != nil {
				errs = failing.First(MaxErrors)
			}
			if whole.Err != nil {
				errs = append([]error{fmt.Errorf("%s: %w", whole.Op, whole.Err)}, errs...)
			}
			if more := failing.N - min(failing.N, MaxErrors); more > 0 {
				errs = append(errs, fmt.Errorf("and %d more", more))
			}
			msg := degradedMessage(failing.N, whole)
			h.last = msg
			health.Degraded(msg[len("Degraded: "):], errors.Join(errs...))
		}
		return
	}
	if h.lastPlain && objects == h.lastCount && suspended == h.lastSuspended {
		h.Dirty = false
		return
	}
	msg := fmt.Sprintf("OK, %d object(s)", objects)
	if suspended {
		msg = fmt.Sprintf("Suspended, %d object(s)", objects)
	}
	h.Dirty = false
	h.lastPlain, h.lastCount, h.lastSuspended = true, objects, suspended
	if msg != h.last {
		h.last = msg
		health.OK(msg)
	}
}

// degradedMessage is a Degraded report's first line.
func degradedMessage(failing int, whole Whole) string {
	msg := fmt.Sprintf("Degraded: %d object(s) failing", failing)
	switch {
	case whole.What != "" && failing == 0:
		msg = "Degraded: " + whole.What
	case whole.What != "":
		msg += ", " + whole.What
	case whole.Err != nil:
		msg += ", " + whole.Op + " failed"
	}
	return msg
}

// Failure is one recent failure: a primary key (raw: made printable only
// when listed), the error and when.
type Failure struct {
	Key, Err string
	At       time.Time
}

// Recent keeps the last MaxRecent failures, newest last.
type Recent struct {
	buf  [MaxRecent]Failure
	next int
	n    int
}

// Add records a failure.
func (r *Recent) Add(f Failure) {
	r.buf[r.next] = f
	r.next = (r.next + 1) % MaxRecent
	r.n = min(r.n+1, MaxRecent)
}

// List returns the recent failures, newest first, keys made printable.
func (r *Recent) List() []Failure {
	out := make([]Failure, 0, r.n)
	for i := 1; i <= r.n; i++ {
		f := r.buf[(r.next-i+MaxRecent)%MaxRecent]
		f.Key = PrintableKey(f.Key)
		out = append(out, f)
	}
	return out
}

// FirstErrors returns the failures of the smallest keys of failing, at
// most n, in key order.
func FirstErrors(n int, failing iter.Seq2[string, string]) []error {
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
		errs[i] = fmt.Errorf("%s: %s", PrintableKey(k), msgs[k])
	}
	return errs
}

// PrintableKey shows a primary key: as text when it is printable, else in
// hex.
func PrintableKey(k string) string {
	for _, r := range k {
		if r < 0x20 || r > 0x7e {
			return fmt.Sprintf("%x", k)
		}
	}
	return k
}
