package shard

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/converge-go/converge/etcd/fencing"
	"github.com/converge-go/converge/etcd/internal/ownership"
	"github.com/converge-go/converge/reconciler"
)

// Manager claims this replica's share of the group's slots in etcd and
// tells reconcilers which keys they own. It is the engine's Ownership for
// sharded reconcilers: Owns reports whether the key's slot is claimed by
// this replica and not being handed over, Acquire hands out operation
// contexts fenced by the slot's token, and Changed fires when the owned set
// changes.
//
// Construct it with New and run it with Run (Cell does both in a hive).
type Manager struct {
	cfg Config
	log *slog.Logger

	// claims[s] is the live claim on slot s while this replica owns it and
	// is not handing it over; nil otherwise. Owns reads it without a lock.
	claims  []atomic.Pointer[ownership.Claim]
	changed ownership.Notifier

	mu      sync.Mutex
	members []string // live members, sorted, as last seen
}

var _ reconciler.Ownership = (*Manager)(nil)

// New validates cfg and returns a manager that owns nothing until Run.
// It fails with an error wrapping ErrInvalidConfig that names the field.
func New(cfg Config, log *slog.Logger) (*Manager, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{
		cfg:    cfg,
		log:    log.With("shards", cfg.Prefix, "name", cfg.Name),
		claims: make([]atomic.Pointer[ownership.Claim], cfg.Slots),
	}, nil
}

// Name returns this replica's member name.
func (m *Manager) Name() string { return m.cfg.Name }

// Slots returns the number of slots.
func (m *Manager) Slots() int { return m.cfg.Slots }

// SlotOf returns key's slot.
func (m *Manager) SlotOf(key []byte) int { return SlotOf(key, m.cfg.Slots) }

// Owns implements Ownership. It is one hash and one atomic load. key == nil
// (the whole set) is never owned: whole-set reconcilers (SyncOperations)
// are leader-only and belong under package leader, not here. A Prune is
// not whole-set work here: it covers the slots held (Acquire(ctx, nil)).
func (m *Manager) Owns(key []byte) bool {
	if key == nil {
		return false
	}
	return m.claims[m.SlotOf(key)].Load() != nil
}

// Acquire implements Ownership. While this replica owns key's slot, it
// returns a context derived from ctx that carries the slot's fencing token
// and is cancelled when the claim ends (lease in doubt, claim lost, drain
// timeout, stop; context.Cause says which), and release, which the caller
// must call once the operation has ended: a slot being handed over is
// released to its new owner only once every such operation has been
// released, or DrainTimeout has passed. ok == false when the slot is not
// owned or is being handed over; nothing may start.
//
// key == nil asks for a Prune of the slots this replica holds (see
// acquirePrune): ok while it holds at least one. The Prune's context
// carries no single token; the target fences each removal with
// Acquire(pruneCtx, key), which then succeeds only for the slots held when
// the Prune was acquired, under the same claims. The engine must read
// which keys it owns, for the objects it gives Prune, after Acquire.
func (m *Manager) Acquire(ctx context.Context, key []byte) (context.Context, func(), bool) {
	if key == nil {
		return m.acquirePrune(ctx)
	}
	slot := m.SlotOf(key)
	c := m.claims[slot].Load()
	if c == nil || !inPruneScope(ctx, slot, c) {
		return nil, nil, false
	}
	return c.Start(ctx)
}

// Changed implements Ownership: the channel is closed at the next change
// of the owned slots.
func (m *Manager) Changed() <-chan struct{} { return m.changed.Changed() }

// Owned returns the slots this replica owns now, in order.
func (m *Manager) Owned() []int {
	var out []int
	for s := range m.claims {
		if m.claims[s].Load() != nil {
			out = append(out, s)
		}
	}
	return out
}

// Token returns the fencing token of slot while this replica owns it.
func (m *Manager) Token(slot int) (fencing.Token, bool) {
	c := m.claims[slot].Load()
	if c == nil {
		return fencing.Token{}, false
	}
	return c.Token(), true
}

// ClaimedAt returns when this replica claimed slot, while it owns it:
// every operation under the claim started after it, so a result stamped
// earlier is from an earlier ownership (the fleet example's summary counts
// such a Done as not yet done again).
func (m *Manager) ClaimedAt(slot int) (time.Time, bool) {
	c := m.claims[slot].Load()
	if c == nil {
		return time.Time{}, false
	}
	return c.Since(), true
}

// Members returns the group's live members as last seen, sorted.
func (m *Manager) Members() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.members)
}

func (m *Manager) setMembers(ms []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.members = ms
}
