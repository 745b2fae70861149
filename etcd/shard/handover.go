package shard

import (
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/fencing"
	"github.com/converge-go/converge/etcd/internal/ownership"
)

// reconcile moves the held slots toward the assignment: it starts draining
// the slots that belong to another member now, claims the free slots that
// belong to this one, and settles the slot keys found under this replica's
// lease that it does not hold (see orphan).
func (ss *session) reconcile() {
	me := ss.m.cfg.Name
	var claim []int
	adopted := false
	for slot, want := range ss.assigned {
		c := ss.held[slot]
		h, taken := ss.holders[slot]
		switch {
		case c != nil && want != me && !ss.draining[slot]:
			ss.startDrain(slot, c)
		case c != nil:
		case taken && h.lease == ss.s.Lease():
			adopted = ss.orphan(slot, h, want == me) || adopted
		case !taken && want == me:
			claim = append(claim, slot)
		}
	}
	if adopted {
		ss.m.changed.Notify()
	}
	for len(claim) > 0 {
		n := min(len(claim), claimBatch)
		ss.claim(claim[:n])
		claim = claim[n:]
	}
}

// orphan settles a slot key that is under this replica's own lease but
// not held: a claim etcd applied whose answer was lost (the client saw
// Unavailable, a reset connection; clientv3 does not retry a Txn once it
// was sent). Nobody else can claim the slot while the key lives, so
// leaving it orphans the slot for as long as the lease lives. If the slot
// is assigned here the key is this replica's claim, with its create
// revision as the token, and adopt reports true; otherwise it is released
// like a handed-over claim. A key being released already is left alone.
func (ss *session) orphan(slot int, h holder, mine bool) (adopt bool) {
	if ss.unrelease[slot] != nil {
		return false
	}
	tok := fencing.Token{Key: ss.slotKey(slot), Revision: h.createRev, Lease: h.lease}
	c := ownership.NewClaim(tok)
	if !mine {
		c.End(ErrHandedOver)
		ss.unrelease[slot] = c
		ss.retryReleases()
		return false
	}
	ss.m.log.Info("shards: adopting a claim whose answer was lost", "slot", slot, "token", tok)
	ss.held[slot] = c
	ss.m.claims[slot].Store(c)
	return true
}

// claim asks for free slots in one transaction, each slot's put guarded by
// its key being absent: a slot is claimed only after its previous holder
// released it or the holder's lease expired.
func (ss *session) claim(slots []int) {
	ops := make([]clientv3.Op, len(slots))
	for i, slot := range slots {
		key := ss.slotKey(slot)
		ops[i] = clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
			[]clientv3.Op{clientv3.OpPut(key, ss.m.cfg.Name, clientv3.WithLease(ss.s.Lease()))},
			nil)
	}
	ctx, cancel := ss.call()
	defer cancel()
	resp, err := ss.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		ss.m.log.Warn("shards: claim failed", "slots", len(slots), "error", err)
		ss.retry = true
		return
	}
	// Every put of one transaction has the transaction's revision as its
	// create revision: that is the fencing number of each new claim.
	rev := resp.Header.Revision
	claimed := false
	for i, slot := range slots {
		if !resp.Responses[i].GetResponseTxn().GetSucceeded() {
			continue // someone holds it; the watch tells us who
		}
		tok := fencing.Token{Key: ss.slotKey(slot), Revision: rev, Lease: ss.s.Lease()}
		c := ownership.NewClaim(tok)
		ss.held[slot] = c
		ss.holders[slot] = holder{name: ss.m.cfg.Name, createRev: rev, lease: ss.s.Lease()}
		ss.m.claims[slot].Store(c)
		claimed = true
	}
	if claimed {
		ss.m.changed.Notify()
	}
}

// startDrain stops new operations on slot and waits, in the background, for
// those in flight; release follows.
func (ss *session) startDrain(slot int, c *ownership.Claim) {
	ss.draining[slot] = true
	ss.m.claims[slot].Store(nil)
	ss.m.changed.Notify()
	drained := c.Drain()
	ss.wg.Add(1)
	go func() {
		defer ss.wg.Done()
		t := time.NewTimer(ss.m.cfg.DrainTimeout)
		defer t.Stop()
		d := drainDone{slot: slot}
		select {
		case <-drained:
		case <-t.C:
			d.timeout = true
		case <-ss.ctx.Done():
			return
		}
		select {
		case ss.drained <- d:
		case <-ss.ctx.Done():
		}
	}()
}

// release ends a drained slot's claim and deletes its key, guarded by the
// claim's revision, so that the new owner can claim it.
func (ss *session) release(d drainDone) {
	c := ss.held[d.slot]
	if c == nil || !ss.draining[d.slot] {
		return
	}
	cause := ErrHandedOver
	if d.timeout {
		cause = ErrDrainTimeout
	}
	// End first: operations that outlived the drain timeout are cancelled
	// before the new owner can start.
	c.End(cause)
	delete(ss.held, d.slot)
	delete(ss.draining, d.slot)
	ss.unrelease[d.slot] = c
	ss.retryReleases()
}

// retryReleases deletes the claim keys of ended claims.
func (ss *session) retryReleases() {
	for slot, c := range ss.unrelease {
		tok := c.Token()
		ctx, cancel := ss.call()
		_, err := ss.cli.Txn(ctx).If(tok.Compare()).Then(clientv3.OpDelete(tok.Key)).Commit()
		cancel()
		if err != nil {
			// The delete may have been applied with its answer lost: the
			// key, if still there, is released again at the next retry.
			ss.m.log.Warn("shards: release failed", "slot", slot, "error", err)
			ss.retry = true
			continue
		}
		delete(ss.unrelease, slot)
		// Gone: not to be taken for an orphan of ours before the watch
		// delivers the delete.
		if h, ok := ss.holders[slot]; ok && h.createRev == tok.Revision {
			delete(ss.holders, slot)
		}
	}
}

// drop ends a held slot's claim at once (no drain): the claim is lost.
func (ss *session) drop(slot int, c *ownership.Claim, cause error) {
	ss.m.claims[slot].Store(nil)
	c.End(cause)
	delete(ss.held, slot)
	delete(ss.draining, slot)
	ss.m.changed.Notify()
}

// drainAll stops new operations on every held slot and waits until those
// in flight have been released, DrainTimeout has passed, or the lease is in
// doubt, whichever comes first.
func (ss *session) drainAll() {
	var drained []<-chan struct{}
	for slot, c := range ss.held {
		ss.m.claims[slot].Store(nil)
		drained = append(drained, c.Drain())
	}
	ss.m.changed.Notify()
	t := time.NewTimer(ss.m.cfg.DrainTimeout)
	defer t.Stop()
	for _, ch := range drained {
		select {
		case <-ch:
		case <-t.C:
			return
		case <-ss.s.Lost():
			return
		}
	}
}

// endAll ends every claim of the session with cause, cancelling every
// operation in flight before it returns. It returns channels that are
// closed once those operations have been released.
func (ss *session) endAll(cause error) []<-chan struct{} {
	var drained []<-chan struct{}
	for slot, c := range ss.held {
		drained = append(drained, c.Drain())
		ss.drop(slot, c, cause)
	}
	ss.m.changed.Notify()
	return drained
}

// waitDrained waits until every channel is closed or until passes.
func (ss *session) waitDrained(drained []<-chan struct{}, until time.Time) {
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	for _, ch := range drained {
		select {
		case <-ch:
		case <-t.C:
			return
		}
	}
}

func (ss *session) slotKey(slot int) string {
	return ss.m.cfg.Prefix + "/slots/" + strconv.Itoa(slot)
}
