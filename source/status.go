package source

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// StatusSnapshot is what a source is doing, for Source.Status, the
// source/status command and health.
type StatusSnapshot struct {
	Module string `json:"module"`
	Name   string `json:"name"`
	Table  string `json:"table"`

	// State is "listing", "watching", "backing off" or "stopped".
	State string `json:"state"`
	// Initialized says the source has marked its table initializer done:
	// a list succeeded and every listed item was read successfully once
	// (or InitForced says why not). Until then the reconciler neither
	// prunes nor syncs the whole set.
	Initialized bool `json:"initialized"`
	// NeverRead counts the items that fail and were never read
	// successfully; while the table is not initialized, they are what
	// it waits for.
	NeverRead int `json:"never-read"`
	// InitForced says why the table was initialized although items
	// failed (Config.InitTimeout, Source.InitializeAnyway); "" if not.
	InitForced string `json:"init-forced,omitempty"`

	Items   int `json:"items"`   // keys that produced objects
	Objects int `json:"objects"` // rows the source wrote and owns

	Events  uint64 `json:"events"`  // events received from watches
	Commits uint64 `json:"commits"` // write transactions of events
	Upserts uint64 `json:"upserts"` // rows written, by events and relists
	Deletes uint64 `json:"deletes"` // rows deleted, by events and relists
	Relists uint64 `json:"relists"` // successful lists, the first included

	LastRelist Relist `json:"last-relist"`

	// LastSync is when the table last matched a successful list or commit.
	LastSync time.Time `json:"last-sync"`
	// LastError is the last list or watch error, and LastErrorAt when it
	// happened; it is current while LastErrorAt is after LastSync.
	LastError   string    `json:"last-error,omitempty"`
	LastErrorAt time.Time `json:"last-error-at"`

	// LastContact is when the store last answered (a list, an event, a
	// Bookmark), StartedAt when the source started, and StaleAfter the
	// Config bound past which no contact makes the source Degraded.
	LastContact time.Time     `json:"last-contact"`
	StartedAt   time.Time     `json:"started-at"`
	StaleAfter  time.Duration `json:"stale-after"`

	// Failing are the first items (by key) whose Transform failed or
	// whose row is owned by another writer; FailingCount counts them all.
	Failing      []ItemError `json:"failing,omitempty"`
	FailingCount int         `json:"failing-count"`

	// Pending is the number of keys waiting in the buffer, and Lag the age
	// of the oldest of them.
	Pending int           `json:"pending"`
	Lag     time.Duration `json:"lag"`
	Resume  string        `json:"resume"`

	UpdatedAt time.Time `json:"updated-at"`
}

// Relist is one list and replace.
type Relist struct {
	At       time.Time     `json:"at"`
	Reason   RelistReason  `json:"reason"`
	Duration time.Duration `json:"duration"`
	Items    int           `json:"items"`
	Upserts  int           `json:"upserts"`
	Deletes  int           `json:"deletes"`
}

// ItemError is why one item has no (new) objects.
type ItemError struct {
	Key   string `json:"key"`
	Error string `json:"error"`
}

// maxFailingShown bounds Failing in snapshots and health.
const maxFailingShown = 10

// DisplayName is the source's name in commands and health.
func (s StatusSnapshot) DisplayName() string { return ID{s.Module, s.Name}.DisplayName() }

// Healthy reports whether the source is synced, in contact with its
// store, initialized once listed, and no item fails.
func (s StatusSnapshot) Healthy() bool {
	return s.FailingCount == 0 && (s.LastError == "" || !s.LastErrorAt.After(s.LastSync)) &&
		!s.Stale() && !s.initBlocked()
}

// Stale reports whether the store has not been heard from for longer
// than StaleAfter.
func (s StatusSnapshot) Stale() bool {
	return s.StaleAfter > 0 && !s.StartedAt.IsZero() && s.UpdatedAt.Sub(s.contact()) > s.StaleAfter
}

func (s StatusSnapshot) contact() time.Time {
	if s.LastContact.After(s.StartedAt) {
		return s.LastContact
	}
	return s.StartedAt
}

// initBlocked: listed, but failing items keep the table uninitialized.
func (s StatusSnapshot) initBlocked() bool { return !s.Initialized && s.NeverRead > 0 }

// HealthMessage is the health report: "OK, N items, M objects", or why it
// is degraded (healthReason, then its details), with the time since the
// last successful sync.
func (s StatusSnapshot) HealthMessage() string {
	if s.Healthy() {
		return fmt.Sprintf("OK, %d items, %d objects", s.Items, s.Objects)
	}
	if d := s.details(); d != "" {
		return s.healthReason() + "; " + d
	}
	return s.healthReason()
}

// healthReason is the summary of a degraded health: the time since the
// last sync, staleness, what blocks initialization, how many items fail.
func (s StatusSnapshot) healthReason() string {
	var b strings.Builder
	since := "never synced"
	if !s.LastSync.IsZero() {
		since = fmt.Sprintf("last sync %s ago", s.UpdatedAt.Sub(s.LastSync).Round(time.Millisecond))
	}
	b.WriteString(since)
	if s.Stale() {
		fmt.Fprintf(&b, "; no contact with the store for %s (bound %s): the desired state may be stale",
			s.UpdatedAt.Sub(s.contact()).Round(time.Millisecond), s.StaleAfter)
	}
	if s.initBlocked() {
		fmt.Fprintf(&b, "; table not initialized (no prune, no whole-set sync) until %d failing item(s) are read once or removed", s.NeverRead)
	}
	if s.FailingCount > 0 {
		fmt.Fprintf(&b, "; %d item(s) failing", s.FailingCount)
	}
	return b.String()
}

// details are the errors behind a degraded health: the current list or
// watch error, and the first failing items with theirs.
func (s StatusSnapshot) details() string {
	var parts []string
	if s.LastError != "" && s.LastErrorAt.After(s.LastSync) {
		parts = append(parts, s.LastError)
	}
	for _, e := range s.Failing {
		parts = append(parts, e.Key+": "+e.Error)
	}
	return strings.Join(parts, "; ")
}

// cause is the error a degraded health carries: the details, so that a
// report of "reason: error" says each thing once.
func (s StatusSnapshot) cause() error {
	if d := s.details(); d != "" {
		return errors.New(d)
	}
	if s.Stale() {
		return errors.New("no contact with the store")
	}
	return errors.New("degraded")
}

// tracker holds the parts of the status that change, under a mutex: the
// source's goroutine writes, Status reads.
type tracker struct {
	mu   sync.Mutex
	snap StatusSnapshot
}

func (t *tracker) update(fn func(s *StatusSnapshot)) {
	t.mu.Lock()
	fn(&t.snap)
	t.mu.Unlock()
}

func (t *tracker) get() StatusSnapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.snap
	s.Failing = slices.Clone(s.Failing)
	return s
}

// failingList returns the first failing items by key.
func failingList(failing map[string]string) []ItemError {
	keys := slices.Sorted(maps.Keys(failing))
	if len(keys) > maxFailingShown {
		keys = keys[:maxFailingShown]
	}
	out := make([]ItemError, len(keys))
	for i, k := range keys {
		out[i] = ItemError{Key: k, Error: failing[k]}
	}
	return out
}
