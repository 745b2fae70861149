package reconciler

import (
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
	// (whole set: waiting for the next Sync or in the running one);
	// InFlight the operations running now (a batch, or a Sync, counts
	// once).
	Waiting  int `json:"waiting"`
	InFlight int `json:"in-flight"`

	// OldestWaiting is how long the longest-waiting picked-up object has
	// waited, as of the call to Status: it grows while an operation hangs.
	OldestWaiting time.Duration `json:"oldest-waiting"`

	LastRound RoundInfo `json:"last-round"`
	LastFull  FullInfo  `json:"last-full"`

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

// Status implements Reconciler.
func (r *reconciler[Obj]) Status() StatusSnapshot {
	if s := r.snapshot.Load(); s != nil {
		snap := *s
		// Suspend and Resume take effect at once; say so at once too.
		snap.Suspended = r.suspended()
		// Summarized when asked, not after every round: it sorts.
		snap.Realization = r.realized.info()
		if !snap.oldestSince.IsZero() {
			snap.OldestWaiting = max(time.Since(snap.oldestSince), 0)
		}
		return snap
	}
	return StatusSnapshot{
		Module:      r.id.ModuleID,
		Name:        r.cfg.Name,
		Table:       r.cfg.Table.Name(),
		Suspended:   r.suspended(),
		Realization: r.realized.info(),
	}
}
