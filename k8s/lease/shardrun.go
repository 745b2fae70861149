package lease

import (
	"context"
	"maps"
	"slices"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/converge-go/converge/internal/slots"
)

// Run holds this replica's share of the group's slots until ctx ends:
// it renews the membership Lease every RetryPeriod and, on a loop of its
// own, looks at the group every RetryPeriod, claims the slots assigned
// to it that are free, hands over those assigned elsewhere, and releases
// what it should not hold. At the end of ctx it stops starting
// operations, waits (at most DrainTimeout) for those in flight, cancels
// the rest, releases its slots and deletes its membership Lease, so that
// the others take the slots at once. It returns nil once done.
func (m *Sharder) Run(ctx context.Context) error {
	m.mu.Lock()
	m.lapse = time.AfterFunc(time.Hour, m.onLapse)
	m.lapse.Stop()
	m.mu.Unlock()
	// The membership is renewed until the operations have drained at a
	// stop, so that no other replica can take a slot meanwhile.
	renewCtx, stopRenewing := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRenewing()
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		m.renewLoop(renewCtx)
	}()
	for ctx.Err() == nil {
		m.step(ctx)
		select {
		case <-ctx.Done():
		case <-m.wake:
		case <-time.After(wait.Jitter(m.cfg.RetryPeriod, 0.2)):
		}
	}
	m.stop(func() {
		stopRenewing()
		<-renewed
	})
	m.wg.Wait()
	m.mu.Lock()
	m.lapse.Stop()
	m.mu.Unlock()
	return nil
}

// renewLoop renews the membership Lease every RetryPeriod until ctx ends.
// A renewal that succeeded and came back within LeaseDuration -
// RenewDeadline extends the membership to its send time plus
// RenewDeadline; one slower does not count: the others may have read the
// group, found the old Lease, before it was applied.
func (m *Sharder) renewLoop(ctx context.Context) {
	var member *coordv1.Lease
	for ctx.Err() == nil {
		out, sent, err := m.renewMember(ctx, member)
		if err != nil {
			member = nil // read it again: it may have changed or gone
			m.log.Debug("renewing the membership lease", "error", err)
		} else {
			member = out
			if time.Since(sent) < m.callTimeout() {
				m.extend(sent)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait.Jitter(m.cfg.RetryPeriod, 0.2)):
		}
	}
}

// extend makes the membership valid until sent + RenewDeadline. A
// renewal sent after the membership lapsed starts a new one: the claims
// of the old were all ended at the lapse (or are ended here, if its timer
// has not fired yet), so nothing is owned again without a new claim.
func (m *Sharder) extend(sent time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	at := int64(sent.Sub(m.base))
	if at >= m.validUntil.Load() {
		m.lapseLocked()
	}
	until := at + int64(m.cfg.RenewDeadline)
	if until > m.validUntil.Load() {
		m.validUntil.Store(until)
		m.lapse.Reset(time.Until(m.base.Add(time.Duration(until))))
	}
}

// onLapse ends every claim once the membership is no longer valid.
func (m *Sharder) onLapse() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.valid() {
		m.lapseLocked()
	}
}

// lapseLocked ends every claim, live or draining, with ErrRenewDeadline;
// the caller holds mu.
func (m *Sharder) lapseLocked() {
	m.epoch++
	dropped := false
	for s := range m.claims {
		if c := m.claims[s].Load(); c != nil {
			m.setClaimLocked(s, nil)
			c.end(ErrRenewDeadline)
			dropped = true
		}
	}
	for _, c := range m.draining {
		c.end(ErrRenewDeadline)
	}
	if dropped {
		m.log.Info("membership lapsed: no slot owned")
		m.notifyLocked()
	}
}

// step looks at the group once and acts on every slot.
func (m *Sharder) step(ctx context.Context) {
	v, err := m.list(ctx)
	if err != nil {
		m.log.Debug("looking at the group", "error", err)
		return
	}
	live := m.observe(v)
	m.mu.Lock()
	m.members = live
	m.mu.Unlock()
	for s := range m.cfg.Slots {
		m.stepSlot(ctx, v, s, slots.Assign(s, live))
	}
}

// observe records the members' Leases in v and returns the live members:
// this replica while its membership is valid, and every other whose Lease
// exists and had not been seen unchanged for LeaseDuration when v was
// read.
func (m *Sharder) observe(v groupView) []string {
	see := func(id, rv string) {
		if o, ok := m.seen[id]; !ok || o.rv != rv {
			m.seen[id] = observation{rv: rv, at: v.returned}
		}
	}
	named := map[string]bool{}
	for id, l := range v.members {
		named[id] = true
		see(id, l.ResourceVersion)
	}
	for _, l := range v.slots {
		if h := holderOf(l); h != "" && !named[h] {
			named[h] = true
			see(h, "") // a holder without a membership Lease: absent is a version too
		}
	}
	for id := range m.seen {
		if !named[id] {
			delete(m.seen, id)
		}
	}
	var live []string
	for id := range v.members {
		if id != m.cfg.Identity && !m.expired(id, v) {
			live = append(live, id)
		}
	}
	if m.valid() {
		live = append(live, m.cfg.Identity)
	}
	slices.Sort(live)
	return live
}

// expired reports whether member id's Lease had been seen unchanged (or
// absent) for LeaseDuration when v's list was sent. The member stopped
// owning anything by then: its membership ended at most RenewDeadline
// after it sent the renewal we saw, which was before we saw it.
func (m *Sharder) expired(id string, v groupView) bool {
	o, ok := m.seen[id]
	return ok && v.sent.Sub(o.at) >= m.cfg.LeaseDuration
}

// stepSlot acts on slot s, assigned to owner, as v shows it.
func (m *Sharder) stepSlot(ctx context.Context, v groupView, s int, owner string) {
	l := v.slots[s]
	holder, me := holderOf(l), m.cfg.Identity
	c := m.claims[s].Load()
	m.mu.Lock()
	d := m.draining[s]
	m.mu.Unlock()
	switch {
	case d != nil:
		m.finishDrain(ctx, s, d, l)
	case !m.valid():
		// Not a member now (starting, or lapsed): claims were ended, and
		// what the Leases still name this replica for is left to the
		// membership's renewal, not released and claimed again.
	case c != nil && (holder != me || transitionsOf(l) != c.token.Transitions):
		m.drop(s, c, ErrSlotLost)
	case c != nil && owner != me:
		m.handOver(s, c)
	case c == nil && owner == me && (l == nil || holder == "" || holder == me || m.expired(holder, v)):
		m.claim(ctx, s, l)
	case c == nil && owner != me && holder == me:
		// A claim whose answer was lost, or one left by a lapse.
		if err := m.writeRelease(ctx, l); err != nil {
			m.log.Debug("releasing a slot", "slot", s, "error", err)
		}
	}
}

// claim writes this replica the holder of slot s's Lease and owns the
// slot if the write succeeded and the membership was valid, without a
// lapse, from before the write was sent until now: then no other replica
// can have found this one expired meanwhile.
func (m *Sharder) claim(ctx context.Context, s int, cur *coordv1.Lease) {
	m.mu.Lock()
	epoch := m.epoch
	m.mu.Unlock()
	if !m.valid() {
		return
	}
	out, err := m.writeClaim(ctx, s, cur)
	if err != nil {
		m.log.Debug("claiming a slot", "slot", s, "error", err)
		return
	}
	tok := Token{Lease: m.cfg.Namespace + "/" + out.Name, Holder: m.cfg.Identity, Transitions: transitionsOf(out)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.epoch != epoch || !m.valid() {
		return // the next step claims it again, or releases it
	}
	m.setClaimLocked(s, newSlotClaim(s, tok))
	m.notifyLocked()
}

// drop ends the live claim c on slot s with cause, at once.
func (m *Sharder) drop(s int, c *slotClaim, cause error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.claims[s].Load() != c {
		return
	}
	m.setClaimLocked(s, nil)
	c.end(cause)
	m.notifyLocked()
	m.log.Info("slot lost", "slot", s, "token", c.token)
}

// handOver stops starting operations on slot s and gives those in flight
// DrainTimeout to end; then its claim ends (ErrHandedOver) and the group
// loop releases the slot's Lease.
func (m *Sharder) handOver(s int, c *slotClaim) {
	m.mu.Lock()
	if m.claims[s].Load() != c {
		m.mu.Unlock()
		return
	}
	m.setClaimLocked(s, nil)
	m.draining[s] = c
	m.notifyLocked()
	m.mu.Unlock()
	drained := c.drain()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTimer(m.cfg.DrainTimeout)
		defer t.Stop()
		select {
		case <-drained:
		case <-t.C:
		case <-c.ctx.Done():
		}
		c.end(ErrHandedOver)
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}()
}

// finishDrain releases the Lease of slot s once the claim d handed over
// has ended; the slot is then free for its new owner.
func (m *Sharder) finishDrain(ctx context.Context, s int, d *slotClaim, l *coordv1.Lease) {
	if d.ctx.Err() == nil {
		return
	}
	if holderOf(l) == m.cfg.Identity && transitionsOf(l) == d.token.Transitions {
		if err := m.writeRelease(ctx, l); err != nil {
			m.log.Debug("releasing a slot", "slot", s, "error", err)
			return
		}
	}
	m.mu.Lock()
	delete(m.draining, s)
	m.mu.Unlock()
}

// stop, at the end of Run's context, stops starting operations, drains
// every claim (at most DrainTimeout; the membership is still renewed, and
// a lapse ends them at once), ends them, stops renewing, releases the
// slots' Leases and deletes the membership Lease.
func (m *Sharder) stop(stopRenewing func()) {
	m.mu.Lock()
	for s := range m.claims {
		if c := m.claims[s].Load(); c != nil {
			m.setClaimLocked(s, nil)
			m.draining[s] = c
		}
	}
	claims := maps.Clone(m.draining)
	m.notifyLocked()
	m.mu.Unlock()
	dctx, cancel := context.WithTimeout(context.Background(), m.cfg.DrainTimeout)
	defer cancel()
	for _, c := range claims {
		select {
		case <-c.drain():
		case <-dctx.Done():
		case <-c.ctx.Done():
		}
		c.end(ErrStopped)
	}
	stopRenewing()
	ctx := context.Background()
	if v, err := m.list(ctx); err == nil {
		for s, l := range v.slots {
			if holderOf(l) == m.cfg.Identity {
				if err := m.writeRelease(ctx, l); err != nil {
					m.log.Debug("releasing a slot at stop", "slot", s, "error", err)
				}
			}
		}
	}
	if err := m.deleteMember(ctx); err != nil {
		m.log.Debug("deleting the membership lease", "error", err)
	}
	m.log.Info("stopped")
}
