package source

import "errors"

var (
	// ErrExpired is returned (wrapped) by ListerWatcher.Watch when the
	// resume point it was given is too old to resume from: etcd compacted
	// past it, a Kubernetes API server answered 410 Gone. The source lists
	// again.
	ErrExpired = errors.New("resume point expired")

	// ErrOverflow is returned (wrapped) by ListerWatcher.Watch when it lost
	// events, for example an inotify queue overflow. The source lists
	// again.
	ErrOverflow = errors.New("watch overflowed: events were lost")

	// ErrInvalidConfig is wrapped by the errors of New and Register for a
	// Config that cannot work; the message names the field.
	ErrInvalidConfig = errors.New("invalid source config")

	// ErrStaleWatch is what Emit returns to a watch whose session has
	// ended (the source relisted or stopped meanwhile). Its events are
	// superseded, not applied: return from Watch.
	ErrStaleWatch = errors.New("watch session ended")

	// ErrOwnedByOther is reported for an item whose object has the primary
	// key of a row that Config.Owns says belongs to another writer. The
	// row is left as it is.
	ErrOwnedByOther = errors.New("row is owned by another writer")

	// ErrDuplicate is reported for items that yield objects with the same
	// primary key: on every such item, naming the others. The object of
	// the first item by key is written, so the choice is the same at
	// every resync and after a restart; a repeat within one item fails
	// that item.
	ErrDuplicate = errors.New("object yielded by more than one item")

	// ErrNoPrimaryKey is reported for an item whose Transform returned an
	// object the table's primary index gives no key: statedb would drop
	// such an insert without a word. It is a bug in Transform or in the
	// index; the item keeps the objects it produced before.
	ErrNoPrimaryKey = errors.New("object has no primary key")
)
