package reconciler

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cilium/statedb"
)

// ErrNotRunning is wrapped by the error Explain returns when the
// reconciler's loop is not running: it stopped, or the hive had not
// started it by the time the caller's context ended.
var ErrNotRunning = errors.New("reconciler not running")

// KeyState is where one key stands for a reconciler: the answer to "why is
// this key not Done?" in one word. Explanation carries the details.
type KeyState uint8

const (
	// KeyDone: the table holds the object, Done, and nothing is
	// outstanding for it.
	KeyDone KeyState = iota
	// KeyAbsent: no object with this key and nothing outstanding. Its
	// Delete succeeded (then Explanation.Deleted is set and Since says
	// when, for the reconciler's latest 256 deletes), or it was never
	// reconciled here. Compare Explanation.ReadTo with the revision of
	// the delete to know the reconciler has read it.
	KeyAbsent
	// KeyUnread: the table holds a change of the key the reconciler has
	// not read yet (no room in a round, rounds paced, suspended, or the
	// next round has not come).
	KeyUnread
	// KeyQueued: read and waiting for a worker (or, whole set, for the
	// next Sync).
	KeyQueued
	// KeyBusy: waiting for an earlier attempt on the same key to return
	// (one that ran past its timeout, or whose result is no longer
	// wanted): two operations on one key never run at once.
	KeyBusy
	// KeyRunning: an attempt (Update, Delete, or the Sync covering it) is
	// in flight since Since.
	KeyRunning
	// KeyCommitting: its result is in and its status is being written
	// (or, in ordered mode, waits briefly to be written with a burst's).
	KeyCommitting
	// KeyRetrying: its last attempt failed (or was deferred with
	// RetryAfter); the next one is due at NextAttempt.
	KeyRetrying
	// KeyGivenUp: failed for good (Permanent, MaxRetries spent, or a
	// misconfiguration). Not retried until it changes, or until refresh
	// comes to it at NextAttempt.
	KeyGivenUp
	// KeyNotOwned: another replica owns the key (Config.Ownership).
	KeyNotOwned
	// KeyUnset: its status is Unset: it asks nothing of this reconciler.
	KeyUnset
	// KeyBlocked: with Config.DependsOn, its Update waits for a dependency
	// to be Done (Reason names the first one and its state), or its
	// Delete waits for the objects that depend on it to be deleted from
	// the target (Reason names them). Nothing is attempted meanwhile: no
	// retry, no backoff, no failure.
	KeyBlocked

	keyStateCount
)

var keyStateNames = [keyStateCount]string{
	KeyDone:       "Done",
	KeyAbsent:     "Absent",
	KeyUnread:     "Unread",
	KeyQueued:     "Queued",
	KeyBusy:       "Busy",
	KeyRunning:    "Running",
	KeyCommitting: "Committing",
	KeyRetrying:   "Retrying",
	KeyGivenUp:    "GivenUp",
	KeyNotOwned:   "NotOwned",
	KeyUnset:      "Unset",
	KeyBlocked:    "Blocked",
}

// String returns the state's name, as the script command prints it.
func (s KeyState) String() string {
	if s < keyStateCount {
		return keyStateNames[s]
	}
	return fmt.Sprintf("KeyState(%d)", uint8(s))
}

// MarshalText writes the state's name: JSON and the script command show
// it as String does.
func (s KeyState) MarshalText() ([]byte, error) {
	if s >= keyStateCount {
		return nil, fmt.Errorf("invalid key state %d", uint8(s))
	}
	return []byte(keyStateNames[s]), nil
}

// UnmarshalText reads what MarshalText writes.
func (s *KeyState) UnmarshalText(text []byte) error {
	st, err := ParseKeyState(string(text))
	*s = st
	return err
}

// ParseKeyState returns the state named s (as String writes it).
func ParseKeyState(s string) (KeyState, error) {
	for i, name := range keyStateNames {
		if name == s {
			return KeyState(i), nil
		}
	}
	return 0, fmt.Errorf("unknown key state %q (want one of %s)", s, strings.Join(keyStateNames[:], ", "))
}

// Explanation is the answer of Reconciler.Explain: where one key stands,
// since when, and why.
type Explanation struct {
	// Reconciler is the reconciler's display name, "<module>/<name>".
	Reconciler string `json:"reconciler"`
	// Key is the primary key, as text (hex when not printable).
	Key string `json:"key"`
	// State is where the key stands; Since is when it got there (zero
	// when not known, as for a key with nothing outstanding).
	State KeyState  `json:"state"`
	Since time.Time `json:"since,omitzero"`
	// Reason says in one line why the key is in State: "backoff after 3
	// failure(s)", "breaker open", "waiting for room in a round", ...
	Reason string `json:"reason,omitempty"`

	// Deleted is set when the work outstanding for the key is a Delete,
	// or, for a key absent from the table, when its Delete succeeded (one
	// of the reconciler's latest 256: Since is when).
	Deleted bool `json:"deleted,omitempty"`
	// InTable is set when the table holds an object with the key; Status
	// is this reconciler's status in it (zero when absent).
	InTable bool   `json:"in-table"`
	Status  Status `json:"status,omitzero"`
	// Revision is the revision of the change that asked for the work
	// outstanding (0: nothing outstanding). ReadTo is the revision up to
	// which the reconciler has read the table's changes: a change at a
	// higher revision is not known to it yet.
	Revision statedb.Revision `json:"revision,omitempty"`
	ReadTo   statedb.Revision `json:"read-to"`

	// Attempts counts the consecutive failures; LastError is the last
	// one's message ("" when not failing).
	Attempts  int    `json:"attempts,omitempty"`
	LastError string `json:"last-error,omitempty"`
	// NextAttempt is when the key is tried next: its retry, or the refresh
	// of a Done or given-up object. Zero when nothing is scheduled.
	NextAttempt time.Time `json:"next-attempt,omitzero"`

	// Suspended and Initialized describe the reconciler as a whole: a
	// suspended reconciler starts nothing; before its table is
	// initialized nothing is pruned (whole set: nothing is synced).
	Suspended   bool `json:"suspended,omitempty"`
	Initialized bool `json:"initialized"`

	// At is when the answer was made.
	At time.Time `json:"at"`

	// Changed is closed at the reconciler's next report after this answer
	// (a step in which something changed, or the loop's end): wait on it
	// to explain again without polling.
	Changed <-chan struct{} `json:"-"`
}

// String describes the explanation in a few lines for humans, times
// relative to At.
func (e Explanation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q: %s", e.Reconciler, e.Key, e.State)
	if !e.Since.IsZero() {
		fmt.Fprintf(&b, " for %s", roundDur(e.At.Sub(e.Since)))
	}
	if e.Deleted {
		b.WriteString(" (delete)")
	}
	b.WriteByte('\n')
	if e.Reason != "" {
		fmt.Fprintf(&b, "  why: %s\n", e.Reason)
	}
	if e.LastError != "" {
		fmt.Fprintf(&b, "  last error: %s (%d failure(s))\n", e.LastError, e.Attempts)
	}
	if !e.NextAttempt.IsZero() {
		next := "next attempt"
		if e.State == KeyDone || e.State == KeyGivenUp {
			next = "next refresh"
		}
		fmt.Fprintf(&b, "  %s: %s\n", next, relTime(e.NextAttempt, e.At))
	}
	table := "absent"
	if e.InTable {
		table = e.Status.Kind.String()
	}
	fmt.Fprintf(&b, "  table: %s; ", table)
	if e.Revision != 0 {
		fmt.Fprintf(&b, "asked at revision %d, ", e.Revision)
	}
	fmt.Fprintf(&b, "changes read up to revision %d\n", e.ReadTo)
	switch {
	case e.Suspended:
		b.WriteString("  reconciler: suspended\n")
	case !e.Initialized:
		b.WriteString("  reconciler: table not initialized (nothing is pruned yet)\n")
	}
	return b.String()
}

// relTime says when at is, seen from now.
func relTime(at, now time.Time) string {
	if d := at.Sub(now); d > 0 {
		return "in " + roundDur(d).String()
	}
	return "now (due " + roundDur(now.Sub(at)).String() + " ago)"
}

// explainRequest is a question put to the loop.
type explainRequest struct {
	key   string
	reply chan Explanation
}

// loopSession is how Explain reaches the loop: questions go in on ask,
// started is set once the loop runs, and done is closed when it has
// ended.
type loopSession struct {
	ask     chan explainRequest
	started atomic.Bool
	done    chan struct{}
}

func newLoopSession() *loopSession {
	return &loopSession{ask: make(chan explainRequest), done: make(chan struct{})}
}
