package source

import (
	"context"
)

// EventKind is what happened to an item.
type EventKind uint8

const (
	// Upsert means the item was created or changed; Event.Item is its new
	// content.
	Upsert EventKind = iota
	// Delete means the item is gone. Event.Item may be zero: the source
	// remembers which objects each key produced.
	Delete
	// Bookmark carries only a resume point (Event.Resume), so that a
	// reconnect after a quiet period does not resume from an old one.
	Bookmark
)

// String returns "upsert", "delete" or "bookmark", the values of the
// metrics' kind label.
func (k EventKind) String() string {
	switch k {
	case Upsert:
		return "upsert"
	case Delete:
		return "delete"
	case Bookmark:
		return "bookmark"
	}
	return "unknown"
}

// Event is one change seen by a watch.
type Event[Item any] struct {
	Kind EventKind
	// Key identifies the item in the source (a path, an etcd key,
	// namespace/name). Events of one key are coalesced: only the latest is
	// applied. Required for Upsert and Delete.
	Key string
	// Item is the item's new content (Upsert), or its last content if
	// known (Delete).
	Item Item
	// Resume is the point to resume the watch from after this event (an
	// etcd revision, a resourceVersion); "" keeps the previous one.
	Resume string
}

// ListResult is the complete set of items at one point of the source's
// history.
type ListResult[Item any] struct {
	// Items are every item of the source, keyed as in Event.Key.
	Items []Keyed[Item]
	// Resume is the point to watch from so that no change after the list
	// is missed. "" means the source cannot resume: every reconnect then
	// lists again.
	Resume string
}

// Keyed is an item with its key.
type Keyed[Item any] struct {
	Key  string
	Item Item
	// Unchanged vouches that the item is the one this ListerWatcher last
	// gave the source for Key, by a List that returned without error or
	// an event that emit accepted: the source keeps what the key yields
	// without calling Transform, and Item may be left zero. It makes a
	// resync of unchanged files cost a stat each. Leave it false when
	// unsure.
	Unchanged bool
}

// ListerWatcher is what a user implements to feed a table from an
// external system. Both methods are called from one goroutine, never at the
// same time.
type ListerWatcher[Item any] interface {
	// List returns every item now, with the point to resume watching
	// from. An error is reported and the list retried with backoff.
	List(ctx context.Context) (ListResult[Item], error)

	// Watch streams changes after resume (a point returned by List or
	// carried by an earlier event) to emit, in order, until ctx ends or
	// the watch breaks. emit blocks while the source's buffer is full
	// (backpressure: nothing is dropped) and returns an error when the
	// watch must stop (ctx ended, ErrStaleWatch); Watch then returns.
	//
	// Return an error wrapping ErrExpired when resume is too old, or
	// ErrOverflow when events were lost: the source lists again. Any other
	// error, or nil, is a disconnect: the source watches again from the
	// last resume point it saw, after backoff, or lists again when it has
	// none.
	Watch(ctx context.Context, resume string, emit func(Event[Item]) error) error
}

// Funcs adapts two functions to a ListerWatcher.
type Funcs[Item any] struct {
	ListFunc  func(ctx context.Context) (ListResult[Item], error)
	WatchFunc func(ctx context.Context, resume string, emit func(Event[Item]) error) error
}

// List calls ListFunc.
func (f Funcs[Item]) List(ctx context.Context) (ListResult[Item], error) { return f.ListFunc(ctx) }

// Watch calls WatchFunc.
func (f Funcs[Item]) Watch(ctx context.Context, resume string, emit func(Event[Item]) error) error {
	return f.WatchFunc(ctx, resume, emit)
}
