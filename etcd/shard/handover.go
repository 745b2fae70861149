package shard

import (
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/fencing"
	"github.com/converge-go/converge/etcd/internal/ownership"
)

// reconcile moves the held slots toward the assignment: it starts draining
// the slots that belong to another member now, and claims the free slots
// that belong to this one.
func (ss *session) reconcile() {
	me := ss.m.cfg.Name
	var claim []int
	for slot, want := range ss.assigned {
		c := ss.held[slot]
		switch {
		case c != nil && want != me && !ss.draining[slot]:
			ss.startDrain(slot, c)
		case c == nil && want == me:
			if _, taken := ss.holders[slot]; !taken {
				claim = append(claim, slot)
			}
		}
	}
	for len(claim) > 0 {
		n := min(len(claim), claimBatch)
		ss.claim(claim[:n])
		claim = claim[n:]
	}
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
	resp, err := ss.cli.Txn(ss.ctx).Then(ops...).Commit()
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
		ss.holders[slot] = holder{name: ss.m.cfg.Name, createRev: rev}
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
		_, err := ss.cli.Txn(ss.ctx).If(tok.Compare()).Then(clientv3.OpDelete(tok.Key)).Commit()
		if err != nil {
			ss.m.log.Warn("shards: release failed", "slot", slot, "error", err)
			ss.retry = true
			continue
		}
		delete(ss.unrelease, slot)
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
