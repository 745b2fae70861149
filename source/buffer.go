package source

import (
	"context"
	"sync"
	"time"
)

// buffer coalesces a watch's events per key until the source commits them.
// It holds at most size distinct keys; emit blocks while it is full, so a
// slow table slows the watcher down instead of losing events.
type buffer[Item any] struct {
	size int

	mu      sync.Mutex
	session uint64 // the watch session whose events are accepted
	pending map[string]Event[Item]
	order   []string  // pending's keys in arrival order
	oldest  time.Time // arrival of the oldest pending event
	resume  string    // the latest resume point seen
	touched time.Time // the last contact with the store: a list or an event
	space   chan struct{}
	ready   chan struct{} // cap 1: pending became non-empty
	full    chan struct{} // cap 1: pending reached size
}

func newBuffer[Item any](size int) *buffer[Item] {
	return &buffer[Item]{
		size:    size,
		pending: map[string]Event[Item]{},
		ready:   make(chan struct{}, 1),
		full:    make(chan struct{}, 1),
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// emit adds ev for the given session. It blocks while the buffer is full
// and ev's key is not already pending, and fails with ErrStaleWatch once
// the session is over, or with ctx's error once ctx (the watch's) has
// ended.
func (b *buffer[Item]) emit(ctx context.Context, session uint64, ev Event[Item]) error {
	b.mu.Lock()
	for {
		if b.session != session {
			b.mu.Unlock()
			return ErrStaleWatch
		}
		// A watch whose context has ended is over even if its session is
		// not yet: a goroutine of the watcher woken by the cancellation
		// must not slip its events in before the session ends.
		if err := ctx.Err(); err != nil {
			b.mu.Unlock()
			return err
		}
		if ev.Resume != "" {
			b.resume = ev.Resume
		}
		b.touched = time.Now()
		if ev.Kind == Bookmark {
			b.mu.Unlock()
			return nil
		}
		if _, ok := b.pending[ev.Key]; ok || len(b.pending) < b.size {
			break
		}
		if b.space == nil {
			b.space = make(chan struct{})
		}
		space := b.space
		b.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return ctx.Err()
		}
		b.mu.Lock()
	}
	if _, ok := b.pending[ev.Key]; !ok {
		b.order = append(b.order, ev.Key)
	}
	b.pending[ev.Key] = ev
	if len(b.pending) == 1 {
		b.oldest = time.Now()
		signal(b.ready)
	}
	if len(b.pending) >= b.size {
		signal(b.full)
	}
	b.mu.Unlock()
	return nil
}

// batch is what drain takes out of the buffer.
type batch[Item any] struct {
	events []Event[Item] // one per key, in arrival order of the keys
	oldest time.Time
}

// drain takes every pending event and wakes blocked emitters.
func (b *buffer[Item]) drain() batch[Item] {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := batch[Item]{events: make([]Event[Item], len(b.order)), oldest: b.oldest}
	for i, k := range b.order {
		out.events[i] = b.pending[k]
	}
	clear(b.pending)
	b.order = b.order[:0]
	b.oldest = time.Time{}
	b.wake()
	return out
}

func (b *buffer[Item]) wake() {
	if b.space != nil {
		close(b.space)
		b.space = nil
	}
}

// newSession ends the current session: later emits of it fail with
// ErrStaleWatch. With discard, the pending events are dropped because a
// list supersedes them, and so is the resume point.
func (b *buffer[Item]) newSession(discard bool) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.session++
	if discard {
		clear(b.pending)
		b.order = b.order[:0]
		b.oldest = time.Time{}
		b.resume = ""
		select {
		case <-b.ready:
		default:
		}
		select {
		case <-b.full:
		default:
		}
	}
	b.wake()
	return b.session
}

// contact records a contact with the store (a successful list).
func (b *buffer[Item]) contact() {
	b.mu.Lock()
	b.touched = time.Now()
	b.mu.Unlock()
}

// lastContact returns the time of the last contact with the store.
func (b *buffer[Item]) lastContact() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.touched
}

// setResume records the resume point of a list.
func (b *buffer[Item]) setResume(r string) {
	b.mu.Lock()
	b.resume = r
	b.mu.Unlock()
}

// state returns the resume point, the number of pending keys and the
// arrival of the oldest.
func (b *buffer[Item]) state() (resume string, n int, oldest time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.resume, len(b.pending), b.oldest
}
