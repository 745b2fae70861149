package reconciler

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cilium/statedb/index"
)

// StatusKind is the state of one object's reconciliation.
//
// The zero value is StatusKindPending on purpose: an object inserted with an
// unset status, or decoded from JSON or YAML without a "kind" key, is
// reconciled rather than silently skipped. An object that is to be in the
// table but not reconciled yet says so explicitly, with StatusUnset().
type StatusKind uint8

const (
	// StatusKindPending means the object changed and waits for an Update
	// (or, once deleted, a Delete). It is the zero value.
	StatusKindPending StatusKind = iota

	// StatusKindRefreshing means the object was Done and is being
	// reconciled again to repair drift in the target. Like Pending, it is
	// picked up by the next round.
	StatusKindRefreshing

	// StatusKindDone means the last Update of this revision succeeded.
	StatusKindDone

	// StatusKindError means the last Update failed; Status.Error says why
	// and a retry is scheduled unless the object was given up on (the
	// error was Permanent, or MaxRetries is spent).
	StatusKindError

	// StatusKindUnset means the object is in the table but asks nothing of
	// this reconciler: no Update runs for it. It is statedb's
	// StatusKindUnset with one difference: it is not the zero value, so it
	// is only ever set explicitly (StatusUnset), never by omission.
	//
	// A live object made Unset withdraws whatever was outstanding for its
	// key: a queued request, a retry, a failure given up on (a failed
	// Delete of an earlier object of the key included, as an insert does).
	// It leaves the counts, health and the waits; an attempt still running
	// has its result discarded, no status is written. Setting Pending (or
	// Refreshing) later asks for the Update. Otherwise the object is
	// desired state like any other: Prune, and a whole-set Sync, are handed
	// every object of the table, Unset ones included, so what the target
	// already holds for it is kept; once deleted from the table it gets
	// its Delete as any object does. Refresh never marks it.
	StatusKindUnset

	// statusKindCount is the number of valid kinds; every kind at or past
	// it is invalid.
	statusKindCount
)

// statusKindNames holds the canonical name of each valid kind, indexed by
// kind. Parsing is exact and case-sensitive against these.
var statusKindNames = [statusKindCount]string{
	StatusKindPending:    "Pending",
	StatusKindRefreshing: "Refreshing",
	StatusKindDone:       "Done",
	StatusKindError:      "Error",
	StatusKindUnset:      "Unset",
}

// statusKindKeyBytes backs the index keys: one readable byte per valid kind
// and, last, '?' for every invalid kind. '?' is none of the valid bytes, so
// an object with a corrupt kind is indexed but never matches a query for a
// valid kind.
var statusKindKeyBytes = [statusKindCount + 1]byte{
	StatusKindPending:    'P',
	StatusKindRefreshing: 'R',
	StatusKindDone:       'D',
	StatusKindError:      'E',
	StatusKindUnset:      'U',
	statusKindCount:      '?',
}

// statusKindKeys are preallocated so that Key never allocates: it is called
// for every object on every insert into a table with a status index. Each
// key's capacity is cut to its length, so appending to a returned key copies
// instead of overwriting the shared array.
var statusKindKeys = func() (keys [statusKindCount + 1]index.Key) {
	for i := range keys {
		keys[i] = statusKindKeyBytes[i : i+1 : i+1]
	}
	return keys
}()

// String returns the kind's name: "Pending", "Refreshing", "Done",
// "Error" or "Unset". An out-of-range kind gives "StatusKind(N)" with its
// number, so a corrupt value is visible rather than mistaken for a valid
// one.
func (k StatusKind) String() string {
	if k.Valid() {
		return statusKindNames[k]
	}
	return "StatusKind(" + strconv.Itoa(int(k)) + ")"
}

// Valid reports whether k is one of the five defined kinds.
func (k StatusKind) Valid() bool {
	return k < statusKindCount
}

// ParseStatusKind returns the kind whose String is exactly s. Names are
// case-sensitive ("done" is not "Done"). Any other input gives an error
// that wraps ErrUnknownStatusKind and quotes s.
func ParseStatusKind(s string) (StatusKind, error) {
	for k, name := range statusKindNames {
		if s == name {
			return StatusKind(k), nil
		}
	}
	return 0, fmt.Errorf("%w %q (want Pending, Refreshing, Done, Error or Unset)", ErrUnknownStatusKind, s)
}

// Key returns the statedb index key of the kind: one byte per valid kind,
// and for every invalid kind a byte that matches no valid kind. It never
// allocates; the returned key is shared and must not be modified.
func (k StatusKind) Key() index.Key {
	if !k.Valid() {
		return statusKindKeys[statusKindCount]
	}
	return statusKindKeys[k]
}

// StatusKindFromKey is the inverse of StatusKind.Key for valid kinds. A key
// that is not exactly one valid kind's key (including the key Key gives
// for invalid kinds) fails with an error wrapping ErrUnknownStatusKind.
func StatusKindFromKey(key index.Key) (StatusKind, error) {
	if len(key) == 1 {
		for k := range statusKindCount {
			if key[0] == statusKindKeyBytes[k] {
				return k, nil
			}
		}
	}
	return 0, fmt.Errorf("%w: no kind has index key %q", ErrUnknownStatusKind, []byte(key))
}

// Status is the reconciliation status that a reconciler reads from and
// writes into each object (Config.GetObjectStatus, Config.SetObjectStatus).
//
// Keep it in a named field (Status reconciler.Status): an anonymous embed
// would promote String to the user's object. The zero value is a Pending
// status with no ID. In JSON and YAML a missing "kind" key means Pending;
// an unknown kind is an error.
type Status struct {
	// Kind is the state of the object's reconciliation.
	Kind StatusKind `json:"kind" yaml:"kind"`

	// UpdatedAt is when the status was set; zero if unknown.
	UpdatedAt time.Time `json:"updated-at,omitzero" yaml:"updated-at,omitempty"`

	// Error is the message of the failed operation. It is empty unless
	// Kind is StatusKindError.
	Error string `json:"error,omitempty" yaml:"error,omitempty"`

	// ID identifies one pending request: Pending and Refreshing statuses
	// carry a fresh, process-unique, nonzero ID, Done, Error and Unset
	// carry 0.
	// A StatusSet gives all its absent names the set's ID, which is how a
	// reconciler tells that a status-only change by another reconciler
	// still belongs to the same request.
	ID uint64 `json:"id,omitempty" yaml:"id,omitempty"`
}

// lastStatusID is the last ID handed out by newStatusID.
var lastStatusID atomic.Uint64

// newStatusID returns a process-unique, nonzero ID for a pending request.
// It is safe for concurrent use.
func newStatusID() uint64 {
	id := lastStatusID.Add(1)
	if id == 0 {
		// Only after 2^64 IDs; 0 means "no request", so skip it.
		id = lastStatusID.Add(1)
	}
	return id
}

// StatusPending returns a Pending status stamped now, with a fresh ID. Set
// it on an object whose data changed to have it reconciled.
func StatusPending() Status {
	return Status{Kind: StatusKindPending, UpdatedAt: time.Now(), ID: newStatusID()}
}

// StatusRefreshing returns a Refreshing status stamped now, with a fresh
// ID: the object is reconciled again though its data did not change.
func StatusRefreshing() Status {
	return Status{Kind: StatusKindRefreshing, UpdatedAt: time.Now(), ID: newStatusID()}
}

// StatusDone returns a Done status stamped now, with ID 0.
func StatusDone() Status {
	return Status{Kind: StatusKindDone, UpdatedAt: time.Now()}
}

// StatusError returns an Error status stamped now, with ID 0 and err's
// message. A nil err gives the message "unknown error", so an Error status
// never has an empty message.
func StatusError(err error) Status {
	msg := "unknown error"
	if err != nil {
		msg = err.Error()
	}
	return Status{Kind: StatusKindError, UpdatedAt: time.Now(), Error: msg}
}

// StatusUnset returns an Unset status stamped now, with ID 0: the object
// is in the table but not to be reconciled until its status is set
// Pending. See StatusKindUnset.
func StatusUnset() Status {
	return Status{Kind: StatusKindUnset, UpdatedAt: time.Now()}
}

// IsPendingOrRefreshing reports whether the status asks for reconciliation.
func (s Status) IsPendingOrRefreshing() bool {
	return s.Kind == StatusKindPending || s.Kind == StatusKindRefreshing
}

// String returns the kind, then ": " and the error message if there is
// one, then the age if UpdatedAt is set: "Done (3s ago)", "Error: boom
// (1m ago)", "Pending". Ages are whole seconds, minutes, hours or days,
// or milliseconds under a second.
func (s Status) String() string {
	return s.stringAt(time.Now())
}

// stringAt is String with an explicit clock, for tests.
func (s Status) stringAt(now time.Time) string {
	out := s.Kind.String()
	if s.Error != "" {
		out += ": " + s.Error
	}
	if !s.UpdatedAt.IsZero() {
		out += " (" + statusAge(now.Sub(s.UpdatedAt)) + " ago)"
	}
	return out
}

// statusAge formats d coarsely: a status line needs the order of magnitude,
// not "1m23.456789s". A negative d (clock skew) shows as 0s.
func statusAge(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d < time.Hour:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	case d < 24*time.Hour:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	default:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
}

// Row returns the status as a table cell (statedb's TableRow, db/show):
// the kind, then ": " and the error message if there is one, as in
// "Done" or "Error: connection refused". Unlike String it leaves out the
// age, so it changes only when the status does and a script test's db/cmp
// can match it. (StatusSet.String has no age either.)
func (s Status) Row() string {
	if s.Error == "" {
		return s.Kind.String()
	}
	return s.Kind.String() + ": " + s.Error
}

// sameRequest reports whether st is the very request asked: a pending
// status with the same ID. A status without an ID (built by hand) is never
// taken for an older one: each revision carrying it is a request of its own.
func sameRequest(asked, st Status) bool {
	return st.ID != 0 && st.ID == asked.ID && st.Kind == asked.Kind
}

// sameStatus reports whether two statuses are the same write. A request
// without an ID is like no other, itself in a later revision included: a
// writer that sets a bare Pending again may have changed the data.
func sameStatus(a, b Status) bool {
	if a.ID == 0 && a.IsPendingOrRefreshing() {
		return false
	}
	return a.Kind == b.Kind && a.ID == b.ID && a.Error == b.Error && a.UpdatedAt.Equal(b.UpdatedAt)
}
