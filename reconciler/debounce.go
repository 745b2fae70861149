package reconciler

import (
	"fmt"
	"time"
)

// Defaults of the zero Debounce: a trailing quiet period of 100ms, never
// more than a second in all. A burst of changes (an agent restoring its
// state, a controller relisting) becomes one Sync, a lone change is applied
// within 100ms, and a target that is never quiet is still synced every
// second. Suited to rendering a config file or a ruleset, whose Sync costs
// the same for one change as for a thousand.
const (
	DefaultSyncQuiet   = 100 * time.Millisecond
	DefaultSyncMaxWait = time.Second
)

// Debounce says when a whole-set reconciler (Config.SyncOperations) runs
// Sync after changes. It has two shapes; set the fields of one:
//
//   - Trailing edge (Quiet, MaxWait): Sync once no change has come for Quiet,
//     but no later than MaxWait after the first change not yet synced.
//     Istio's pilot does this (100ms quiet, 10s in all).
//   - Leading edge (Refractory): the first change is synced at once, later
//     ones at most once per Refractory after the previous Sync started.
//
// The zero value is the trailing edge with DefaultSyncQuiet and
// DefaultSyncMaxWait. Whatever the shape, a Sync never starts while another
// runs; changes made meanwhile go into the next one.
//
// While a Sync waits for its debounce, the reconciler reads new changes at
// most every tenth of Quiet (or Refractory), and at least every 10ms,
// rather than waking for each write transaction: a quiet period is
// measured from when the last change was read, up to that much after it
// was written.
type Debounce struct {
	Quiet      time.Duration
	MaxWait    time.Duration
	Refractory time.Duration
}

// Trailing returns the trailing-edge Debounce: Sync after quiet without
// changes, at most maxWait after the first.
func Trailing(quiet, maxWait time.Duration) Debounce {
	return Debounce{Quiet: quiet, MaxWait: maxWait}
}

// LeadingEdge returns the leading-edge Debounce: the first change at once,
// then at most one Sync per refractory.
func LeadingEdge(refractory time.Duration) Debounce {
	return Debounce{Refractory: refractory}
}

// withDefaults fills in the zero value.
func (d Debounce) withDefaults() Debounce {
	if d == (Debounce{}) {
		return Trailing(DefaultSyncQuiet, DefaultSyncMaxWait)
	}
	if d.Refractory == 0 && d.MaxWait == 0 {
		d.MaxWait = max(d.Quiet, DefaultSyncMaxWait)
	}
	return d
}

// validate checks a Debounce after withDefaults.
func (d Debounce) validate() error {
	switch {
	case d.Quiet < 0 || d.MaxWait < 0 || d.Refractory < 0:
		return fmt.Errorf("%w: Config.SyncDebounce durations must not be negative, got %+v", ErrInvalidConfig, d)
	case d.Refractory > 0 && (d.Quiet > 0 || d.MaxWait > 0):
		return fmt.Errorf("%w: Config.SyncDebounce: set Refractory (leading edge) or Quiet and MaxWait (trailing edge), not both", ErrInvalidConfig)
	case d.Refractory == 0 && d.MaxWait < d.Quiet:
		return fmt.Errorf("%w: Config.SyncDebounce.MaxWait (%s) must not be below Quiet (%s)", ErrInvalidConfig, d.MaxWait, d.Quiet)
	}
	return nil
}

// due is when a Sync may start for the changes waiting: the first read at
// first, the latest at last, the previous Sync started at lastStart.
func (d Debounce) due(first, last, lastStart time.Time) time.Time {
	if d.Refractory > 0 {
		return later(first, lastStart.Add(d.Refractory))
	}
	return earlier(last.Add(d.Quiet), first.Add(d.MaxWait))
}

// maxReadEvery bounds readEvery.
const maxReadEvery = 10 * time.Millisecond

// readEvery is how long the loop may leave new changes unread while a Sync
// waits for its debounce: a tenth of the debounce's interval, at most
// maxReadEvery. Reading each change as it commits would wake the loop once
// per write transaction (a thousand times a second in a storm) only to move
// the quiet deadline; reading a little late moves it by at most this much,
// and only later. Every change is read anyway when a Sync takes its
// snapshot.
func (d Debounce) readEvery() time.Duration {
	interval := d.Quiet
	if d.Refractory > 0 {
		interval = d.Refractory
	}
	return min(interval/10, maxReadEvery)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
