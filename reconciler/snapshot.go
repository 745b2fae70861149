package reconciler

import (
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// StatusSnapshot is what a reconciler is doing, for operators and tests:
// Reconciler.Status returns it, the reconciler/status script command shows
// it, and it marshals to JSON. It is taken after each round, so reading it
// costs nothing and it is at most one round old.
type StatusSnapshot struct {
	// Module and Name identify the reconciler; Table is its table.
	Module string `json:"module"`
	Name   string `json:"name,omitempty"`
	Table  string `json:"table"`

	// Objects counts the table's objects by this reconciler's status, as of
	// the changes the reconciler has read. Kept up to date as the
	// reconciler goes: never a table scan.
	Objects ObjectCounts `json:"objects"`

	// FailingDeletes counts deleted objects whose Delete failed.
	FailingDeletes int `json:"failing-deletes"`

	// Retries is the length of the retry queue (objects whose retry is
	// scheduled; whole set: retried by the next Sync); NextRetry is when
	// its earliest entry is due (zero when empty).
	Retries   int       `json:"retries"`
	NextRetry time.Time `json:"next-retry,omitzero"`

	// Waiting is the number of objects picked up and not yet committed
	// (whole set: waiting for the next Sync or in the running one),
	// whether they wait for a worker, run or have their status written.
	// InFlight is the operations running now (a batch, or a Sync, counts
	// once): at most Config.Concurrency. Stuck is the operations that ran
	// past OperationTimeout and still run: counted as failed, their
	// results discarded when they come, and no other operation on their
	// keys starts before they return; not in InFlight.
	Waiting  int `json:"waiting"`
	InFlight int `json:"in-flight"`
	Stuck    int `json:"stuck,omitempty"`

	// Blocked is, with Config.DependsOn, the objects whose operation waits
	// for their dependencies: an Update for a dependency to be Done, a
	// Delete for the objects that depend on it to be deleted. They are
	// not attempted and not failing; Explain says what each waits for.
	Blocked int `json:"blocked,omitempty"`

	// OldestWaiting is how long the longest-waiting picked-up object has
	// waited, as of the call to Status: it grows while an operation hangs.
	OldestWaiting time.Duration `json:"oldest-waiting"`

	LastRound RoundInfo `json:"last-round"`
	LastFull  FullInfo  `json:"last-full"`

	// Ready is, with Config.Priority, FairnessKey or TargetKey, the oldest
	// ready wait of each priority with requests ready, highest first.
	Ready []ReadyWait `json:"ready,omitempty"`

	// Realization summarizes how long the latest changes took to be
	// realized: see RealizationInfo.
	Realization RealizationInfo `json:"realization"`

	Suspended   bool `json:"suspended"`
	Initialized bool `json:"initialized"`

	// RecentErrors are the latest failures, newest first, at most 16.
	RecentErrors []ObjectError `json:"recent-errors,omitempty"`

	// UpdatedAt is when the snapshot was taken.
	UpdatedAt time.Time `json:"updated-at"`

	// oldestSince is when the longest-waiting object was picked up (zero
	// when none waits): Status computes OldestWaiting from it when asked,
	// so a hung operation's wait keeps growing between rounds.
	oldestSince time.Time
}

// ObjectCounts counts objects by status kind.
type ObjectCounts struct {
	Pending    int `json:"pending"`
	Refreshing int `json:"refreshing"`
	Done       int `json:"done"`
	Error      int `json:"error"`
	// Unowned counts the objects another replica owns (Config.Ownership):
	// in none of the other counts.
	Unowned int `json:"unowned,omitempty"`
	// Unset counts the objects whose status is Unset: they ask nothing
	// of the reconciler and are in none of the other counts.
	Unset int `json:"unset,omitempty"`
}

// RoundInfo describes the last round that committed results.
type RoundInfo struct {
	At       time.Time     `json:"at,omitzero"`
	Objects  int           `json:"objects"`
	Duration time.Duration `json:"duration"`
}

// RealizationInfo summarizes the realization latencies of the latest
// changes marked Done, at most the last 1024 of them: the time from a
// change being written (the UpdatedAt of the Pending status its writer
// set) to the commit of its Done status, retries included. Failures,
// refreshes, deletes and statuses without UpdatedAt are not counted. The
// quantiles are nearest-rank; all is zero when nothing was counted yet.
// The same latencies go to ReconcilerMetrics.Realized.
type RealizationInfo struct {
	Samples int           `json:"samples"` // latencies summarized, at most 1024
	P50     time.Duration `json:"p50"`
	P99     time.Duration `json:"p99"`
}

// FullInfo describes the last full reconciliation.
type FullInfo struct {
	At       time.Time     `json:"at,omitzero"`
	Duration time.Duration `json:"duration"`
	Error    string        `json:"error,omitempty"`
}

// ObjectError is one failure: the object's primary key (as text, or hex
// when not printable), the error and when it happened.
type ObjectError struct {
	Key   string    `json:"key"`
	Error string    `json:"error"`
	At    time.Time `json:"at"`
}

// Realization latency is the time from a change being written to the
// commit of the Done status that says the target has it, as kube-proxy's
// network_programming_duration_seconds measures. It starts at the
// UpdatedAt of the Pending status the writer set (StatusPending(), or
// StatusSet.Pending, whose Get gives each name that time) and ends when the
// write transaction that marked the object Done is committed: a round's
// commit, or one of the transactions that write a Sync's result (both
// commit.go). A failed change keeps its start in its row until a retry
// succeeds. The clock is read
// once per transaction. What is not observed, and why:
//
//   - Failed attempts: the change is not realized yet. Its retry that
//     succeeds is observed, from the same start.
//   - Refreshes: not a user's change, only a check for drift.
//   - Deletes: a deleted object leaves no status behind to tell when the
//     delete was written.
//   - A zero UpdatedAt (a status built by hand or decoded from JSON or
//     YAML without it), or one after the commit (another clock's): the
//     start is unknown.

// realizationWindowSize is how many of the latest realization latencies
// Status() summarizes: enough for a stable p99, small enough to sort when
// asked.
const realizationWindowSize = 1024

// realizationWindow keeps the latest realization latencies, a fixed ring
// the loop adds to once per commit without allocating. Its quantiles are
// computed when Status() asks, and only when something was added since.
type realizationWindow struct {
	mu     sync.Mutex
	ring   [realizationWindowSize]time.Duration
	next   int // where the next latency goes
	n      int // latencies held, at most realizationWindowSize
	added  uint64
	sorted [realizationWindowSize]time.Duration // scratch for summary

	// summary as of summarized latencies added.
	summarized uint64
	summary    RealizationInfo
}

func (w *realizationWindow) add(ds []time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(ds) > realizationWindowSize {
		ds = ds[len(ds)-realizationWindowSize:]
	}
	for _, d := range ds {
		w.ring[w.next] = d
		w.next = (w.next + 1) % realizationWindowSize
	}
	w.n = min(w.n+len(ds), realizationWindowSize)
	w.added += uint64(len(ds))
}

// info summarizes the window: nearest-rank p50 and p99.
func (w *realizationWindow) info() RealizationInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.summarized == w.added {
		return w.summary
	}
	s := w.sorted[:w.n]
	copy(s, w.ring[:w.n])
	slices.Sort(s)
	w.summary = RealizationInfo{Samples: w.n, P50: nearestRank(s, 50), P99: nearestRank(s, 99)}
	w.summarized = w.added
	return w.summary
}

// nearestRank is the p-th percentile of sorted, non-empty s: its
// smallest element with at least p% of s at or below it.
func nearestRank(s []time.Duration, p int) time.Duration {
	rank := (len(s)*p + 99) / 100 // ceil(len(s) * p / 100)
	return s[max(rank, 1)-1]
}

// The status snapshot's durations marshal as Go duration strings
// ("26.9ms"), not as bare nanosecond integers that a reader has to know
// the unit of. Each type below marshals through an alias whose duration
// fields are shadowed by strings.

// durationString is a time.Duration that marshals as its String.
type durationString time.Duration

func (d durationString) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// MarshalJSON writes the snapshot with OldestWaiting as a duration string.
func (s StatusSnapshot) MarshalJSON() ([]byte, error) {
	type plain StatusSnapshot
	return json.Marshal(struct {
		plain
		OldestWaiting durationString `json:"oldest-waiting"`
	}{plain(s), durationString(s.OldestWaiting)})
}

// MarshalJSON writes the round with its duration as a string.
func (r RoundInfo) MarshalJSON() ([]byte, error) {
	type plain RoundInfo
	return json.Marshal(struct {
		plain
		Duration durationString `json:"duration"`
	}{plain(r), durationString(r.Duration)})
}

// MarshalJSON writes the full reconciliation with its duration as a
// string.
func (f FullInfo) MarshalJSON() ([]byte, error) {
	type plain FullInfo
	return json.Marshal(struct {
		plain
		Duration durationString `json:"duration"`
	}{plain(f), durationString(f.Duration)})
}

// MarshalJSON writes the quantiles as duration strings.
func (r RealizationInfo) MarshalJSON() ([]byte, error) {
	type plain RealizationInfo
	return json.Marshal(struct {
		plain
		P50 durationString `json:"p50"`
		P99 durationString `json:"p99"`
	}{plain(r), durationString(r.P50), durationString(r.P99)})
}

// UnmarshalJSON reads a duration string, or (as written before durations
// were strings) a number of nanoseconds.
func (d *durationString) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		var ns int64
		if err := json.Unmarshal(data, &ns); err != nil {
			return err
		}
		*d = durationString(ns)
		return nil
	}
	v, err := time.ParseDuration(s)
	*d = durationString(v)
	return err
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *StatusSnapshot) UnmarshalJSON(data []byte) error {
	type plain StatusSnapshot
	aux := struct {
		*plain
		OldestWaiting durationString `json:"oldest-waiting"`
	}{plain: (*plain)(s)}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	s.OldestWaiting = time.Duration(aux.OldestWaiting)
	return nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *RoundInfo) UnmarshalJSON(data []byte) error {
	type plain RoundInfo
	aux := struct {
		*plain
		Duration durationString `json:"duration"`
	}{plain: (*plain)(r)}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	r.Duration = time.Duration(aux.Duration)
	return nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (f *FullInfo) UnmarshalJSON(data []byte) error {
	type plain FullInfo
	aux := struct {
		*plain
		Duration durationString `json:"duration"`
	}{plain: (*plain)(f)}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	f.Duration = time.Duration(aux.Duration)
	return nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *RealizationInfo) UnmarshalJSON(data []byte) error {
	type plain RealizationInfo
	aux := struct {
		*plain
		P50 durationString `json:"p50"`
		P99 durationString `json:"p99"`
	}{plain: (*plain)(r)}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	r.P50, r.P99 = time.Duration(aux.P50), time.Duration(aux.P99)
	return nil
}

// snapshotBox holds the latest StatusSnapshot the loop published. The loop
// writes it in place after every step that changed something, thousands
// of times a second while a backlog drains (a new snapshot each time was
// a tenth of an ordered backlog's allocations); Status copies it out.
type snapshotBox struct {
	mu  sync.Mutex
	s   StatusSnapshot
	set bool
}

// store publishes a copy of s.
func (b *snapshotBox) store(s *StatusSnapshot) {
	b.mu.Lock()
	b.s, b.set = *s, true
	b.mu.Unlock()
}

// load returns a copy of the latest snapshot, or false before the first.
func (b *snapshotBox) load() (StatusSnapshot, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.s, b.set
}
