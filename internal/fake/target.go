// Package fake provides a fake reconciliation target for converge's tests:
// a key-value store that records every operation, fails, panics or hangs on
// demand, and checks that no two operations on one key ever overlap.
package fake

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// Mode is how the target misbehaves for a key.
type Mode string

// The modes a fault can have.
const (
	ModeError     Mode = "error"     // fail with an ordinary error naming the operation
	ModeDown      Mode = "down"      // fail with the same error for every key, as a dead target does
	ModePermanent Mode = "permanent" // fail with the error marked permanent by Fault.Permanent
	ModePanic     Mode = "panic"     // panic
	ModeHang      Mode = "hang"      // block until the context ends (then fail with its error)
	ModeStuck     Mode = "stuck"     // ignore the context: block until healed, then succeed
	ModeDefer     Mode = "defer"     // not ready: RetryAfter(Fault.After, nil)
	ModeRetryAt   Mode = "retry-after"
)

// Fault is a programmed failure.
type Fault struct {
	Mode  Mode
	Count int           // how many operations fail; 0 means until healed
	After time.Duration // for ModeDefer and ModeRetryAt
}

// errTargetDown is ModeDown's error: one message for every key.
var errTargetDown = errors.New("connection refused")

// Wrappers lets the target build the reconciler's special errors without
// importing it (the reconciler's tests import this package).
type Wrappers struct {
	Permanent  func(error) error
	RetryAfter func(time.Duration, error) error
}

// Target is the fake target. The zero value is not usable; use New.
type Target struct {
	wrap Wrappers

	mu       sync.Mutex
	state    map[string]string
	history  []string
	changed  chan struct{}
	faults   map[string]*Fault // by key; "*" applies to every key, "prune" to Prune
	running  map[string]int
	overlaps []string
	ops      int
	latency  func() time.Duration
	release  chan struct{} // closed by Heal: frees ModeStuck operations
}

// New returns an empty target.
func New(wrap Wrappers) *Target {
	return &Target{
		wrap:    wrap,
		state:   map[string]string{},
		changed: make(chan struct{}),
		faults:  map[string]*Fault{},
		running: map[string]int{},
		release: make(chan struct{}),
	}
}

// SetLatency makes every operation take the time f returns (f is called
// under no lock, from the operation's goroutine).
func (t *Target) SetLatency(f func() time.Duration) {
	t.mu.Lock()
	t.latency = f
	t.mu.Unlock()
}

// SetFault programs a fault for key ("*" for every key, "prune" for Prune).
func (t *Target) SetFault(key string, f Fault) {
	t.mu.Lock()
	t.faults[key] = &f
	t.mu.Unlock()
}

// Heal removes the fault of key, or every fault when key is "".
func (t *Target) Heal(key string) {
	t.mu.Lock()
	if key == "" {
		clear(t.faults)
	} else {
		delete(t.faults, key)
	}
	close(t.release)
	t.release = make(chan struct{})
	t.mu.Unlock()
}

// Set puts a value straight into the target, as drift or leftovers would.
func (t *Target) Set(key, value string) {
	t.mu.Lock()
	t.state[key] = value
	t.notifyLocked()
	t.mu.Unlock()
}

// State returns a copy of the target's contents.
func (t *Target) State() map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.state)
}

// History returns the operations so far, in the order they ended.
func (t *Target) History() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.history)
}

// ClearHistory forgets the operations so far. Marks taken before are no
// longer valid: take a new one.
func (t *Target) ClearHistory() {
	t.mu.Lock()
	t.history = nil
	t.mu.Unlock()
}

// Ops is the number of operations started so far.
func (t *Target) Ops() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ops
}

// Overlaps lists the keys that saw two operations at once. It must stay
// empty: the reconciler never runs two operations on one key.
func (t *Target) Overlaps() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.overlaps)
}

// Changed returns a channel that closes at the next operation's end.
func (t *Target) Changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

func (t *Target) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// begin records the start of an operation on key and returns the fault to
// apply, if any.
func (t *Target) begin(key string) (*Fault, func() time.Duration, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ops++
	t.running[key]++
	if t.running[key] > 1 {
		t.overlaps = append(t.overlaps, key)
	}
	f := t.faults[key]
	if f == nil && key != "prune" {
		f = t.faults["*"]
	}
	if f == nil {
		return nil, t.latency, t.release
	}
	fault := *f
	if f.Count > 0 {
		f.Count--
		if f.Count == 0 {
			for k, v := range t.faults {
				if v == f {
					delete(t.faults, k)
				}
			}
		}
	}
	return &fault, t.latency, t.release
}

// end records the end of an operation; apply changes the state when the
// operation succeeded.
func (t *Target) end(key, entry string, err error, apply func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.running[key]--
	if err != nil {
		entry += " fail"
	} else if apply != nil {
		apply()
	}
	t.history = append(t.history, entry)
	t.notifyLocked()
}

// run performs one operation with the programmed fault and latency.
func (t *Target) run(ctx context.Context, key, entry string, apply func()) (err error) {
	fault, latency, release := t.begin(key)
	defer func() {
		if p := recover(); p != nil {
			t.end(key, entry, errors.New("panic"), nil)
			panic(p)
		}
		t.end(key, entry, err, apply)
	}()
	if latency != nil {
		if d := latency(); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if fault == nil {
		return nil
	}
	switch fault.Mode {
	case ModePanic:
		panic(fmt.Sprintf("fake target panics on %s", key))
	case ModeHang:
		<-ctx.Done()
		return ctx.Err()
	case ModeStuck:
		<-release
		return nil
	case ModePermanent:
		return t.wrap.Permanent(fmt.Errorf("%s: permanent failure", entry))
	case ModeDefer:
		return t.wrap.RetryAfter(fault.After, nil)
	case ModeRetryAt:
		return t.wrap.RetryAfter(fault.After, fmt.Errorf("%s: busy", entry))
	case ModeDown:
		return errTargetDown
	default:
		return fmt.Errorf("%s: failure", entry)
	}
}

// Update makes key hold value. refresh only changes the history entry.
func (t *Target) Update(ctx context.Context, key, value string, refresh bool) error {
	entry := "update(" + key + ")"
	if refresh {
		entry = "update-refresh(" + key + ")"
	}
	return t.run(ctx, key, entry, func() { t.state[key] = value })
}

// Delete removes key.
func (t *Target) Delete(ctx context.Context, key string) error {
	return t.run(ctx, key, "delete("+key+")", func() { delete(t.state, key) })
}

// Prune removes every key not in desired.
func (t *Target) Prune(ctx context.Context, desired map[string]bool) error {
	entry := fmt.Sprintf("prune(n=%d)", len(desired))
	return t.run(ctx, "prune", entry, func() {
		for k := range t.state {
			if !desired[k] {
				delete(t.state, k)
			}
		}
	})
}

// Sync makes the target hold exactly desired, at once: a whole-set
// target. Faults programmed for "sync" (or "*") fail the whole Sync, which
// then changes nothing. A fault programmed for a key makes the Sync skip
// that key, as a renderer skips an invalid object: the key keeps what it
// held, and its error (Permanent for ModePermanent) is in failed.
func (t *Target) Sync(ctx context.Context, desired map[string]string) (failed map[string]error, err error) {
	failed = t.keyFaults(desired)
	entry := fmt.Sprintf("sync(n=%d)", len(desired))
	err = t.run(ctx, "sync", entry, func() {
		for k := range t.state {
			if _, ok := desired[k]; !ok && failed[k] == nil {
				delete(t.state, k)
			}
		}
		for k, v := range desired {
			if failed[k] == nil {
				t.state[k] = v
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return failed, nil
}

// keyFaults returns the errors of the keys of desired with a fault of
// their own, using up a counted fault's count.
func (t *Target) keyFaults(desired map[string]string) map[string]error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var failed map[string]error
	for k := range desired {
		f := t.faults[k]
		if f == nil {
			continue
		}
		if failed == nil {
			failed = map[string]error{}
		}
		err := fmt.Errorf("sync(%s): invalid", k)
		if f.Mode == ModePermanent {
			err = t.wrap.Permanent(err)
		}
		failed[k] = err
		if f.Count > 0 {
			if f.Count--; f.Count == 0 {
				delete(t.faults, k)
			}
		}
	}
	return failed
}
