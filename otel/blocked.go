package convergeotel

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/converge-go/converge/reconciler"
)

// The time a key spent Blocked on a dependency (Config.DependsOn): the
// Tracer keeps, per key Blocked (or released and not yet started), when
// it was blocked, on what, and when it was released, so that the attempt
// that follows, if sampled, carries it (its span, which starts when its
// request was read, begins no later than the block). Nothing is kept for
// a key that was not blocked, and no more than MaxBlocked keys at once.

// MaxBlocked is the most Blocked keys a Tracer remembers at once: beyond
// it, the attempts of a key blocked later show no blocked time, so that
// keys that stay Blocked for good cannot grow it without bound.
const MaxBlocked = 1 << 17

// The attributes of the blocked time.
const (
	// AttrBlocked is, on an attempt span, how long its key was Blocked
	// before it (from the first block to the release).
	AttrBlocked = attribute.Key("converge.blocked_seconds")
	// AttrBlockedOn is, on the span event "blocked", what the key waited
	// for (as Explain says it).
	AttrBlockedOn = attribute.Key("converge.blocked_on")
)

// block is a key's time Blocked.
type block struct {
	since, released time.Time
	on              string
}

// blocked notes that e's key is Blocked (again: the first block stands).
func (t *Tracer) blocked(e *reconciler.Event) {
	on := ""
	if e.Err != nil {
		on = e.Err.Error()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if b := t.blocks[e.Key]; b != nil {
		b.released, b.on = time.Time{}, on
		return
	}
	if len(t.blocks) >= MaxBlocked {
		return
	}
	t.blocks[e.Key] = &block{since: e.Time, on: on}
	t.nblocked.Store(int64(len(t.blocks)))
}

// released notes that e's key is released.
func (t *Tracer) released(e *reconciler.Event) {
	if t.nblocked.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if b := t.blocks[e.Key]; b != nil {
		b.released = e.Time
	}
}

// takeBlocked removes and returns key's block, if it has one.
func (t *Tracer) takeBlocked(key string) *block {
	if t.nblocked.Load() == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.blocks[key]
	if b != nil {
		delete(t.blocks, key)
		t.nblocked.Store(int64(len(t.blocks)))
	}
	return b
}

// forgetBlocked forgets key's block: its attempt is not traced.
func (t *Tracer) forgetBlocked(key string) { t.takeBlocked(key) }

// spanStart is when the attempt span of a key blocked as b begins: at the
// block, if that is earlier than start.
func (b *block) spanStart(start time.Time) time.Time {
	if b != nil && b.since.Before(start) {
		return b.since
	}
	return start
}

// record adds b to an attempt's span: the events "blocked" and
// "released", and the time blocked.
func (b *block) record(span trace.Span, started time.Time) {
	end := b.released
	if end.IsZero() || end.After(started) {
		end = started // not told of the release (a delete's dependents went)
	}
	span.SetAttributes(AttrBlocked.Float64(end.Sub(b.since).Seconds()))
	span.AddEvent("blocked", trace.WithTimestamp(b.since), trace.WithAttributes(AttrBlockedOn.String(b.on)))
	span.AddEvent("released", trace.WithTimestamp(end))
}

// Blocked returns how many keys the Tracer remembers a block of: keys
// Blocked, or released and not yet started.
func (t *Tracer) Blocked() int { return int(t.nblocked.Load()) }
