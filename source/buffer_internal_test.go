package source

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
)

// A full buffer blocks the emitter of a new key until a drain, coalesces
// events of pending keys without blocking, and drops nothing.
func TestBufferBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBuffer[int](2)
		ctx := context.Background()
		s := b.newSession(false)
		up := func(k string, v int) Event[int] { return Event[int]{Kind: Upsert, Key: k, Item: v} }
		for _, ev := range []Event[int]{up("a", 1), up("b", 1), up("a", 2)} {
			if err := b.emit(ctx, s, ev); err != nil {
				t.Fatal(err)
			}
		}
		done := make(chan error, 1)
		go func() { done <- b.emit(ctx, s, up("c", 1)) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("emit into a full buffer returned %v instead of blocking", err)
		default:
		}
		got := b.drain()
		if len(got.events) != 2 || got.events[0].Item != 2 || got.events[1].Key != "b" {
			t.Fatalf("drained %+v, want a=2 then b=1", got.events)
		}
		synctest.Wait()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := b.drain(); len(got.events) != 1 || got.events[0].Key != "c" {
			t.Fatalf("drained %+v, want c", got.events)
		}
	})
}

// An emitter blocked on a full buffer is released with ErrStaleWatch when
// its session ends, and with the context's error when that ends.
func TestBufferReleasesBlockedEmitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBuffer[int](1)
		s := b.newSession(false)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if err := b.emit(ctx, s, Event[int]{Key: "a"}); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 2)
		go func() { done <- b.emit(ctx, s, Event[int]{Key: "b"}) }()
		synctest.Wait()
		b.newSession(true)
		if err := <-done; !errors.Is(err, ErrStaleWatch) {
			t.Fatalf("got %v, want ErrStaleWatch", err)
		}
		s = b.newSession(false)
		b.emit(ctx, s, Event[int]{Key: "a"})
		go func() { done <- b.emit(ctx, s, Event[int]{Key: "b"}) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	})
}

// An emit whose watch context has already ended is refused, even while
// its session is still the current one: a watcher goroutine woken by the
// cancellation must not get its events (or its resume point) accepted in
// the moment before the source ends the session.
func TestBufferRefusesEmitAfterContextEnds(t *testing.T) {
	b := newBuffer[int](4)
	s := b.newSession(false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := b.emit(ctx, s, Event[int]{Kind: Upsert, Key: "a", Item: 1, Resume: "7"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("emit after the watch context ended returned %v, want context.Canceled", err)
	}
	if resume, n, _ := b.state(); n != 0 || resume != "" {
		t.Fatalf("refused emit left %d pending and resume %q", n, resume)
	}
}
