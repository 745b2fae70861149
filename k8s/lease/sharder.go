package lease

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/converge-go/converge/internal/slots"
	"github.com/converge-go/converge/reconciler"
)

// The causes of a slot claim's end that an Elector's term does not have,
// as context.Cause of its operations' contexts. A claim also ends with
// ErrRenewDeadline (the membership Lease was not renewed in time) and
// ErrStopped (a clean stop).
var (
	// ErrHandedOver: the slot moved to another replica; its operations
	// were given DrainTimeout to end.
	ErrHandedOver = errors.New("lease: slot handed over")
	// ErrSlotLost: the slot's Lease names another holder, or is gone.
	ErrSlotLost = errors.New("lease: slot lost")
	// ErrOwnershipChanged: a Prune's context ends when the slots held
	// change.
	ErrOwnershipChanged = errors.New("lease: owned slots changed")
)

// Sharder splits the keys of a group of replicas between them with
// Leases: each replica renews a membership Lease, every replica computes
// the same rendezvous assignment of Slots slots to the live members, and
// a replica owns a slot once it has written itself the holder of the
// slot's Lease (a compare-and-swap on its resourceVersion). It is the
// engine's reconciler.Ownership for sharded reconcilers: Owns is one hash,
// two atomic loads and a clock read; Acquire hands out operation contexts
// carrying the slot's fencing Token; Changed fires when the owned slots
// change. Construct it with NewSharder and run it with Run (ShardCell does
// both in a hive).
type Sharder struct {
	cfg  ShardConfig
	log  *slog.Logger
	base time.Time // validUntil counts from it, on the monotonic clock

	// validUntil is when this replica's membership stops being valid, in
	// nanoseconds since base: the send time of its last renewal that
	// counted, plus RenewDeadline. No claim is owned from then on.
	validUntil atomic.Int64
	// claims[s] is the live claim on slot s while this replica owns it
	// and is not handing it over; nil otherwise. Set under mu; Owns
	// reads it without a lock.
	claims []atomic.Pointer[slotClaim]

	mu       sync.Mutex
	changed  chan struct{}      // closed at the next change of claims
	draining map[int]*slotClaim // claims handed over, their Lease not yet released
	members  []string           // live members as last seen, sorted
	lapse    *time.Timer        // ends every claim at validUntil
	spans    []span             // ownership history, for tests
	// epoch grows at every lapse of the membership: a claim is recorded
	// only if no lapse happened since before its write was sent.
	epoch uint64

	seen map[string]observation // the group loop's: members' Leases as first seen
	wake chan struct{}          // wakes the group loop: a drain ended
	wg   sync.WaitGroup         // drains waiting, ended by Run
}

// observation is a member's Lease as this replica first saw it with its
// current resourceVersion ("" for absent), and the local time the list
// that showed it came back: the member renewed at most then.
type observation struct {
	rv string
	at time.Time
}

// span is a stretch of ownership of one slot, as Owns answered it.
type span struct {
	slot       int
	start, end time.Time // end is zero while owned
}

var _ reconciler.Ownership = (*Sharder)(nil)

// NewSharder validates cfg and returns a sharder that owns nothing until
// Run. Its errors wrap ErrInvalidConfig and name the field.
func NewSharder(cfg ShardConfig, log *slog.Logger) (*Sharder, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sharder{
		cfg:      cfg,
		log:      log.With("shards", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity),
		base:     time.Now(),
		claims:   make([]atomic.Pointer[slotClaim], cfg.Slots),
		changed:  make(chan struct{}),
		draining: map[int]*slotClaim{},
		seen:     map[string]observation{},
		wake:     make(chan struct{}, 1),
	}, nil
}

// SlotOf returns key's slot: slots.Of, the same as the etcd module's
// shard.SlotOf for the same number of slots.
func (m *Sharder) SlotOf(key []byte) int { return slots.Of(key, m.cfg.Slots) }

// Slots returns the number of slots.
func (m *Sharder) Slots() int { return m.cfg.Slots }

// Identity returns this replica's name in the group.
func (m *Sharder) Identity() string { return m.cfg.Identity }

// valid reports whether this replica's membership is valid now.
func (m *Sharder) valid() bool { return int64(time.Since(m.base)) < m.validUntil.Load() }

// Owns implements reconciler.Ownership: whether key's slot is claimed by
// this replica, not being handed over, and its membership Lease renewed
// within RenewDeadline. key == nil (the whole set) is never owned:
// whole-set reconcilers (SyncOperations) are leader-only; give them an
// Elector. A Prune is not whole-set work here: see Acquire.
func (m *Sharder) Owns(key []byte) bool {
	if key == nil {
		return false
	}
	return m.claims[m.SlotOf(key)].Load() != nil && m.valid()
}

// Acquire implements reconciler.Ownership. While this replica owns key's
// slot it returns a context derived from ctx that carries the slot's
// fencing Token (TokenFrom) and is cancelled when the claim ends
// (ErrRenewDeadline, ErrHandedOver, ErrSlotLost, ErrStopped as its cause),
// and release, which must be called once the operation has returned: a
// slot handed over is released to its new owner only once every such
// operation has been released, or DrainTimeout has passed. Otherwise ok
// is false and nothing may start.
//
// key == nil asks for a Prune of the slots held: ok while at least one is
// held. The context carries no single token and is cancelled
// (ErrOwnershipChanged) at any change of the slots owned; the target
// fences each removal with Acquire(pruneCtx, key), which succeeds only for
// a slot still held under the claim held when the Prune was acquired.
func (m *Sharder) Acquire(ctx context.Context, key []byte) (context.Context, func(), bool) {
	if key == nil {
		return m.acquirePrune(ctx)
	}
	slot := m.SlotOf(key)
	c := m.claims[slot].Load()
	if c == nil || !m.valid() || !inPruneScope(ctx, slot, c) {
		return nil, nil, false
	}
	return c.start(ctx)
}

// Changed implements reconciler.Ownership: the channel is closed at the
// next change of the owned slots.
func (m *Sharder) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// Owned returns the slots this replica owns now, in order.
func (m *Sharder) Owned() []int {
	if !m.valid() {
		return nil
	}
	var out []int
	for s := range m.claims {
		if m.claims[s].Load() != nil {
			out = append(out, s)
		}
	}
	return out
}

// Token returns slot's fencing token while this replica owns it.
func (m *Sharder) Token(slot int) (Token, bool) {
	c := m.claims[slot].Load()
	if c == nil || !m.valid() {
		return Token{}, false
	}
	return c.token, true
}

// Members returns the group's live members as this replica last saw
// them, sorted.
func (m *Sharder) Members() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.members)
}

// setClaimLocked makes c (nil: none) the live claim of slot and records
// the change; the caller holds mu and notifies.
func (m *Sharder) setClaimLocked(slot int, c *slotClaim) {
	// The span is widened on both sides: Owns may answer true from the
	// Swap on, and answers false only once the Swap is done.
	start := time.Now()
	old := m.claims[slot].Swap(c)
	if old != nil {
		end := time.Now()
		if until := m.base.Add(time.Duration(m.validUntil.Load())); until.Before(end) {
			end = until // Owns answered false from then on
		}
		for i := len(m.spans) - 1; i >= 0; i-- {
			if m.spans[i].slot == slot && m.spans[i].end.IsZero() {
				m.spans[i].end = end
				break
			}
		}
	}
	if c != nil {
		m.spans = append(m.spans, span{slot: slot, start: start})
	}
}

// notifyLocked closes Changed's channel; the caller holds mu.
func (m *Sharder) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}
