// Package sourcetest provides an in-memory, revisioned store that
// implements source.ListerWatcher, with hooks to inject the faults real
// systems have: disconnects, expired resume points, overflows, duplicate
// events and events delivered by a watch that has already ended. The
// source package's tests and the benchmarks use it; use it to test code
// built on source without a real backend.
package sourcetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/converge-go/converge/source"
)

// Fault is what the Faults hook makes a watch do at one event.
type Fault uint8

const (
	// None delivers the event normally.
	None Fault = iota
	// Disconnect ends the watch with an error before the event, as a
	// dropped connection does; the source resumes from its last point.
	Disconnect
	// Expire ends the watch with source.ErrExpired before the event.
	Expire
	// Overflow ends the watch with source.ErrOverflow before the event.
	Overflow
	// Duplicate delivers the event twice.
	Duplicate
	// Stale ends the watch like Disconnect, but keeps a goroutine that
	// emits the event (and every later one it sees) after Watch returned,
	// as a buggy watcher would: the source must refuse them.
	Stale
)

// ErrDisconnected is what a watch returns at a Disconnect fault.
var ErrDisconnected = errors.New("sourcetest: disconnected")

type logEntry[Item any] struct {
	rev uint64
	ev  source.Event[Item]
}

// Store is the external system of a test: items by key, with a revision
// that every change increments and a log of changes that watches replay.
// Its zero value is not usable; call NewStore.
type Store[Item any] struct {
	mu            sync.Mutex
	rev           uint64
	items         map[string]Item
	log           []logEntry[Item] // changes after compacted, in order
	compacted     uint64
	changed       chan struct{} // closed and replaced on every change
	stale         sync.WaitGroup
	staleAccepted atomic.Int64
	watching      atomic.Int32
	sorted        []string // the keys in order, for List; nil when stale

	// Faults, when set before the store is used, is asked before every
	// event a watch delivers.
	Faults func(ev source.Event[Item]) Fault
	// NoResume makes List return no resume point, so that every watch
	// reconnect lists again.
	NoResume bool
	// ListErr, when set, is called by every List; an error it returns
	// fails the list.
	ListErr func() error
}

// NewStore returns an empty store at revision 0.
func NewStore[Item any]() *Store[Item] {
	return &Store[Item]{items: map[string]Item{}, changed: make(chan struct{})}
}

func (s *Store[Item]) record(ev source.Event[Item]) uint64 {
	s.rev++
	ev.Resume = strconv.FormatUint(s.rev, 10)
	s.log = append(s.log, logEntry[Item]{rev: s.rev, ev: ev})
	close(s.changed)
	s.changed = make(chan struct{})
	return s.rev
}

// Set creates or changes key and returns the new revision.
func (s *Store[Item]) Set(key string, item Item) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.items[key]; !ok {
		s.sorted = nil
	}
	s.items[key] = item
	return s.record(source.Event[Item]{Kind: source.Upsert, Key: key, Item: item})
}

// Delete removes key (a missing key is still a change) and returns the new
// revision.
func (s *Store[Item]) Delete(key string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	item, ok := s.items[key]
	if ok {
		s.sorted = nil
	}
	delete(s.items, key)
	return s.record(source.Event[Item]{Kind: source.Delete, Key: key, Item: item})
}

// Compact forgets the change log up to the current revision: a watch
// from an earlier point then fails with source.ErrExpired.
func (s *Store[Item]) Compact() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compacted = s.rev
	s.log = nil
}

// Items returns a copy of the current items.
func (s *Store[Item]) Items() map[string]Item {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.items)
}

// Revision returns the current revision.
func (s *Store[Item]) Revision() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// Wait blocks until the goroutines left behind by Stale faults have
// ended; they end when the watch context they were given ends.
func (s *Store[Item]) Wait() { s.stale.Wait() }

// Watching returns how many watches are running.
func (s *Store[Item]) Watching() int { return int(s.watching.Load()) }

// StaleAccepted returns how many events emitted by watches that had
// already ended (Stale faults) the source accepted; it must be 0.
func (s *Store[Item]) StaleAccepted() int64 { return s.staleAccepted.Load() }

// List implements source.ListerWatcher: every item in key order (as etcd
// and Kubernetes list), resume
// point the current revision.
func (s *Store[Item]) List(ctx context.Context) (source.ListResult[Item], error) {
	if s.ListErr != nil {
		if err := s.ListErr(); err != nil {
			return source.ListResult[Item]{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res := source.ListResult[Item]{Items: make([]source.Keyed[Item], 0, len(s.items))}
	if s.sorted == nil {
		s.sorted = slices.Sorted(maps.Keys(s.items))
	}
	for _, k := range s.sorted {
		res.Items = append(res.Items, source.Keyed[Item]{Key: k, Item: s.items[k]})
	}
	if !s.NoResume {
		res.Resume = strconv.FormatUint(s.rev, 10)
	}
	return res, ctx.Err()
}

// next returns the log entries after rev, or a channel that is closed at
// the next change.
func (s *Store[Item]) next(rev uint64) ([]logEntry[Item], <-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rev < s.compacted {
		return nil, nil, fmt.Errorf("watch from %d, compacted at %d: %w", rev, s.compacted, source.ErrExpired)
	}
	i, _ := slices.BinarySearchFunc(s.log, rev+1, func(e logEntry[Item], r uint64) int {
		return int(e.rev) - int(r)
	})
	if i < len(s.log) {
		return slices.Clone(s.log[i:]), nil, nil
	}
	return nil, s.changed, nil
}

// Watch implements source.ListerWatcher: it replays the changes after
// resume (or, with no resume point, starts from now), then follows new
// ones, applying Faults.
func (s *Store[Item]) Watch(ctx context.Context, resume string, emit func(source.Event[Item]) error) error {
	s.watching.Add(1)
	defer s.watching.Add(-1)
	var rev uint64
	if resume == "" {
		// No resume point (NoResume): watch from now, missing whatever
		// changed since the list, as such a watch does.
		rev = s.Revision()
	} else {
		var err error
		if rev, err = strconv.ParseUint(resume, 10, 64); err != nil {
			return fmt.Errorf("sourcetest: bad resume point %q: %w", resume, source.ErrExpired)
		}
	}
	for {
		entries, changed, err := s.next(rev)
		if err != nil {
			return err
		}
		if changed != nil {
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		for i, e := range entries {
			if err := s.deliver(ctx, e, entries[i:], emit); err != nil {
				return err
			}
			rev = e.rev
		}
	}
}

// deliver emits one entry, applying the fault the hook picks; rest are
// the entries from this one on, for a Stale fault to emit late.
func (s *Store[Item]) deliver(ctx context.Context, e logEntry[Item], rest []logEntry[Item], emit func(source.Event[Item]) error) error {
	f := None
	if s.Faults != nil {
		f = s.Faults(e.ev)
	}
	switch f {
	case Disconnect:
		return ErrDisconnected
	case Expire:
		return fmt.Errorf("sourcetest: injected: %w", source.ErrExpired)
	case Overflow:
		return fmt.Errorf("sourcetest: injected: %w", source.ErrOverflow)
	case Stale:
		s.stale.Add(1)
		go func() {
			defer s.stale.Done()
			// Deliver late: once the source has moved on.
			<-ctx.Done()
			for _, e := range rest {
				if err := emit(e.ev); err == nil {
					s.staleAccepted.Add(1)
				}
			}
		}()
		return ErrDisconnected
	case Duplicate:
		if err := emit(e.ev); err != nil {
			return err
		}
	}
	return emit(e.ev)
}
