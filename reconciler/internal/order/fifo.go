package order

import (
	"slices"
	"time"
)

// slot is an entry as the queue keeps it, twice (in its level's arrivals
// and its target's list): a slot holds only what its lists do not say, a
// third of an Entry's bytes with fewer pointers for the GC to follow.
type slot[T any] struct {
	item T
	gen  uint32
	at   time.Duration // when it became ready, from the queue's base
	tq   *fifo[T]      // its target's list
}

// fifo is a first-in, first-out list of slots.
type fifo[T any] struct {
	fair, target string // a target's list: its fairness key and target
	items        []slot[T]
	head         int
}

// push appends s, doubling the list when it is full: append grows a
// large slice by a quarter, five times the bytes it ends with.
func (f *fifo[T]) push(s slot[T]) {
	if len(f.items) == cap(f.items) {
		f.items = slices.Grow(f.items, max(len(f.items), 8))
	}
	f.items = append(f.items, s)
}

func (f *fifo[T]) len() int       { return len(f.items) - f.head }
func (f *fifo[T]) peek() *slot[T] { return &f.items[f.head] }

func (f *fifo[T]) drop() {
	f.items[f.head] = slot[T]{}
	f.head++
	if f.head == len(f.items) {
		f.items, f.head = f.items[:0], 0
	} else if f.head > 64 && f.head > len(f.items)/2 {
		f.items = append(f.items[:0], f.items[f.head:]...)
		f.head = 0
	}
}
