package source

import (
	"fmt"
	"time"

	"github.com/cilium/statedb"
)

// Off, given as Config.Resync, InitTimeout or StaleAfter, turns that
// bound off.
const Off time.Duration = -1

// Defaults of Config's tuning fields.
const (
	// DefaultBufferSize bounds the distinct keys waiting to be committed.
	// Cilium's reflector uses 10000; at 200k events/s that is 50 ms of
	// events, one commit's worth.
	DefaultBufferSize = 10000
	// DefaultBufferWait is how long the first event of a batch waits for
	// more before the batch is committed: long enough to gather the events
	// that arrive together (one watch response, one transaction's keys),
	// short enough to add nothing noticeable to a change's latency. Under
	// load batches grow by themselves, up to BufferSize: events keep
	// arriving while a commit waits for and holds the write lock. (Cilium's
	// reflector waits 50 ms, which puts 50 ms into every change's latency.)
	DefaultBufferWait = time.Millisecond
	// DefaultBackoffMin and DefaultBackoffMax bound the wait before a
	// failed list or watch is retried; it doubles on each failure.
	DefaultBackoffMin = 100 * time.Millisecond
	DefaultBackoffMax = 30 * time.Second
)

// Config describes one source. Zero tuning fields mean the documented
// defaults.
type Config[Item any, Obj comparable] struct {
	// Name tells the sources of one module apart (job, health, metrics,
	// Status, the table initializer). Required, unique in the module.
	Name string

	// Table is the table the source writes. Required.
	Table statedb.RWTable[Obj]

	// ListerWatcher reads the external system. Required. If it
	// implements io.Closer, the source closes it when it stops.
	ListerWatcher ListerWatcher[Item]

	// Transform turns one item into the objects it stands for: none, one
	// or many. An error is reported on that item's key (health, Status)
	// and the item keeps the objects it produced before. A list
	// transforms its items on every core at once: Transform and Equal
	// must be safe for concurrent use. Required.
	Transform func(key string, item Item) ([]Obj, error)

	// Equal reports whether two objects have the same desired content,
	// the status excluded. An object equal to the row the table holds is
	// not written. Required.
	Equal func(a, b Obj) bool

	// Pending returns obj (which the source owns: a fresh result of
	// Transform) with the status that makes the reconciler pick it up,
	// typically SetObjectStatus(obj, reconciler.StatusPending()). nil
	// writes objects as Transform made them.
	Pending func(obj Obj) Obj

	// Owns reports whether a row of the table is this source's, for
	// writes and deletes alike: the source writes or deletes a row only
	// while Owns says it is its own, and reports the item instead
	// (ErrOwnedByOther). Set it when several writers share the table
	// (other sources, an API), for example to a check of an owner field
	// or a key prefix. nil: a row is the source's only while its content
	// (Equal) is still what the source wrote; a row the source never
	// wrote, or that another writer changed, is left alone and reported.
	// Equal never decides whose a row is.
	Owns func(obj Obj) bool

	// Owner names the writer of a row, for the ErrOwnedByOther report
	// ("written by api"). Optional.
	Owner func(obj Obj) string

	// InitTimeout bounds how long the table initializer waits, after the
	// first list, for items that fail and have never been read
	// successfully. While such an item exists the table is not
	// initialized, so a reconciler neither prunes nor runs whole-set
	// Syncs, and whatever the item yielded before a restart stays in the
	// target; health names the items. When the bound passes the table is
	// initialized anyway, with a warning, and a prune may then remove
	// those objects. Default Off (0 means Off): wait until every item is
	// read or removed, or until Source.InitializeAnyway is called.
	InitTimeout time.Duration

	// StaleAfter is how long the source may go without contact with its
	// store (a list, an event or a Bookmark) before health is Degraded
	// with the time since the last contact. Default Off (0 means Off):
	// for stores that are quiet when nothing changes and cannot say they
	// are alive. A ListerWatcher that sends Bookmarks while idle (etcd's
	// progress notifications) can set it.
	StaleAfter time.Duration

	// BufferSize bounds how many distinct keys wait to be committed; a
	// watch that finds the buffer full blocks. Default DefaultBufferSize.
	BufferSize int

	// BufferWait is how long a batch collects events after its first one
	// before it is committed. Default DefaultBufferWait.
	BufferWait time.Duration

	// Resync is the period of a full relist, whose unchanged items cost no
	// writes. Default Off (0 means Off): set it for sources whose watch can
	// miss events without noticing.
	Resync time.Duration

	// BackoffMin and BackoffMax bound the wait before a failed list or
	// watch is tried again. Defaults DefaultBackoffMin, DefaultBackoffMax.
	BackoffMin, BackoffMax time.Duration

	// Metrics receives the source's metrics. nil: Params.DefaultMetrics,
	// else none.
	Metrics Metrics
}

func (c *Config[Item, Obj]) setDefaults() {
	if c.BufferSize == 0 {
		c.BufferSize = DefaultBufferSize
	}
	if c.BufferWait == 0 {
		c.BufferWait = DefaultBufferWait
	}
	if c.Resync == 0 {
		c.Resync = Off
	}
	if c.InitTimeout == 0 {
		c.InitTimeout = Off
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = Off
	}
	if c.BackoffMin == 0 {
		c.BackoffMin = DefaultBackoffMin
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = DefaultBackoffMax
	}
}

// validate checks a Config after setDefaults; its errors wrap
// ErrInvalidConfig and name the field as it is spelled.
func (c *Config[Item, Obj]) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Name == "":
		return bad("Name is required")
	case c.Table == nil:
		return bad("Table is required")
	case c.ListerWatcher == nil:
		return bad("ListerWatcher is required")
	case c.Transform == nil:
		return bad("Transform is required")
	case c.Equal == nil:
		return bad("Equal is required")
	case c.BufferSize < 0:
		return bad("BufferSize %d is negative", c.BufferSize)
	case c.BufferWait < 0:
		return bad("BufferWait %s is negative", c.BufferWait)
	case c.Resync < 0 && c.Resync != Off:
		return bad("Resync %s is negative (use Off)", c.Resync)
	case c.InitTimeout < 0 && c.InitTimeout != Off:
		return bad("InitTimeout %s is negative (use Off)", c.InitTimeout)
	case c.StaleAfter < 0 && c.StaleAfter != Off:
		return bad("StaleAfter %s is negative (use Off)", c.StaleAfter)
	case c.BackoffMin < 0 || c.BackoffMax < c.BackoffMin:
		return bad("BackoffMin %s and BackoffMax %s must satisfy 0 <= BackoffMin <= BackoffMax", c.BackoffMin, c.BackoffMax)
	}
	return nil
}
