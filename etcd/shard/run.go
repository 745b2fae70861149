package shard

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/internal/lease"
	"github.com/converge-go/converge/etcd/internal/ownership"
	"github.com/converge-go/converge/etcd/internal/watch"
)

// claimBatch is how many slots one claim transaction asks for (each as a
// nested transaction); etcd's default limit is 128 operations a txn.
const claimBatch = 64

// Run registers this replica as a member of the group, claims the slots
// rendezvous hashing gives it, and hands over the ones it no longer should
// hold, until ctx ends; then it releases every slot at once by revoking its
// lease. When the lease is in doubt every slot is dropped before the lease
// can expire, and a new session joins again. Errors talking to etcd are
// logged and retried after RetryInterval. Run returns nil once ctx ends, or
// ErrSlotsMismatch.
func (m *Manager) Run(ctx context.Context) error {
	for {
		err := m.runSession(ctx)
		if errors.Is(err, ErrSlotsMismatch) {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		m.log.Warn("shards: starting over", "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(m.cfg.RetryInterval):
		}
	}
}

// holder is who holds a slot's claim key, as last seen in etcd.
type holder struct {
	name      string
	createRev int64
	lease     clientv3.LeaseID // the lease the key is attached to
}

type drainDone struct {
	slot    int
	timeout bool
}

// session is the state of one lease's membership.
type session struct {
	m   *Manager
	s   *lease.Session
	ctx context.Context
	cli *clientv3.Client

	members   map[string]bool
	assigned  []string       // slot -> member, by rendezvous over members
	holders   map[int]holder // slot -> holder of its claim key in etcd
	held      map[int]*ownership.Claim
	draining  map[int]bool
	unrelease map[int]*ownership.Claim // ended, but deleting the key failed
	retry     bool                     // a claim or release failed; try again
	pub       publisher

	drained chan drainDone
	wg      sync.WaitGroup
}

func (m *Manager) runSession(ctx context.Context) (err error) {
	s, err := lease.Start(ctx, m.cfg.Client, m.cfg.TTL, m.cfg.SafetyMargin)
	if err != nil {
		return fmt.Errorf("session: %w", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	ss := &session{
		// A member without a leader refuses the session's calls at once
		// instead of holding them until its own request timeout; reads
		// are retried on the next member.
		m: m, s: s, ctx: clientv3.WithRequireLeader(sctx), cli: m.cfg.Client,
		members: map[string]bool{}, holders: map[int]holder{},
		held: map[int]*ownership.Claim{}, draining: map[int]bool{},
		unrelease: map[int]*ownership.Claim{}, drained: make(chan drainDone),
		pub: publisher{interval: m.cfg.SummaryInterval},
	}
	defer func() {
		cancel()
		ss.wg.Wait()
		cause := err
		if cause == nil {
			// A clean stop hands over like a drain: nothing new starts,
			// and what is in flight ends before the slots are released.
			cause = ErrStopped
			ss.drainAll()
		}
		// Cancelled operations, too, end before the slots are released,
		// unless the lease will have expired by then anyway. At a stop
		// they already had DrainTimeout; they get ReleaseTimeout more.
		until := time.Now().Add(m.cfg.ReleaseTimeout)
		if cause != ErrStopped {
			until = s.Deadline().Add(m.cfg.SafetyMargin)
		}
		ss.waitDrained(ss.endAll(cause), until)
		// Revoking deletes the member key and every claim at once: a
		// clean stop hands over without waiting for the TTL.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.ReleaseTimeout)
		defer rcancel()
		s.Close(rctx)
	}()
	// Every etcd call of the session is bounded by the lease: once it is
	// in doubt, a call stuck on an unreachable etcd returns, and the loop
	// drops the slots in time.
	ss.wg.Add(1)
	go func() {
		defer ss.wg.Done()
		select {
		case <-s.Lost():
			cancel()
		case <-sctx.Done():
		}
	}()
	rev, err := ss.join()
	if err != nil {
		return err
	}
	// The group's watch must not go blind (package watch): its silence is
	// taken to mean that no member joined or left and no claim moved.
	w := watch.New(sctx, ss.cli, m.cfg.Prefix+"/", rev+1, 0, clientv3.WithPrefix())
	defer w.Stop()
	return ss.loop(ctx, w.C())
}

func (ss *session) loop(ctx context.Context, wch <-chan watch.Response) error {
	retry := time.NewTicker(ss.m.cfg.RetryInterval)
	defer retry.Stop()
	summary := time.NewTicker(ss.m.cfg.SummaryInterval)
	defer summary.Stop()
	for {
		ss.reconcile()
		ss.publish()
		select {
		case <-summary.C:
		case <-ss.s.Lost():
			return ErrLeaseInDoubt
		case <-ctx.Done():
			return nil
		case wr, ok := <-wch:
			if !ok || wr.Err != nil {
				return ss.watchEnded(ctx, wr.Err)
			}
			ss.apply(wr.Events)
		case d := <-ss.drained:
			ss.release(d)
		case <-retry.C:
			if !ss.retry {
				continue
			}
			ss.retry = false
			ss.retryReleases()
		}
	}
}

// watchEnded says why the group's watch ended: it closes when the
// session's context ends, which the lease in doubt and a stop both do, and
// ends with an error once its revision is compacted (then the session
// joins again, reading the whole group).
func (ss *session) watchEnded(ctx context.Context, err error) error {
	select {
	case <-ss.s.Lost():
		return ErrLeaseInDoubt
	default:
	}
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("watch of %s ended: %v", ss.m.cfg.Prefix, err)
}

// callTimeout bounds each etcd call of the session's loop. A member that
// has just been cut from its peers still believes it has a leader for an
// election timeout, and holds a request sent to it then until its own
// request timeout (5 s and more): the loop must not wait that long. A
// write that timed out may have been applied; the watch shows it (a claim
// is then adopted, see orphan).
const callTimeout = time.Second

// call returns the context of one etcd call of the loop.
func (ss *session) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(ss.ctx, callTimeout)
}

// join checks the group's slot count, registers the member under the
// lease, and reads the group's state; it returns the revision read.
func (ss *session) join() (int64, error) {
	m := ss.m
	countKey := m.cfg.Prefix + "/slots"
	want := strconv.Itoa(m.cfg.Slots)
	resp, err := ss.cli.Txn(ss.ctx).
		If(clientv3.Compare(clientv3.CreateRevision(countKey), "=", 0)).
		Then(clientv3.OpPut(countKey, want)).
		Else(clientv3.OpGet(countKey)).Commit()
	if err != nil {
		return 0, fmt.Errorf("slot count: %w", err)
	}
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 1 && string(kvs[0].Value) != want {
			return 0, fmt.Errorf("%w: group has %s, Config.Slots is %s", ErrSlotsMismatch, kvs[0].Value, want)
		}
	}
	memberKey := m.cfg.Prefix + "/members/" + m.cfg.Name
	if _, err := ss.cli.Put(ss.ctx, memberKey, m.cfg.Name, clientv3.WithLease(ss.s.Lease())); err != nil {
		return 0, fmt.Errorf("register member: %w", err)
	}
	get, err := ss.cli.Get(ss.ctx, m.cfg.Prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("read group: %w", err)
	}
	for _, kv := range get.Kvs {
		ss.applyPut(string(kv.Key), string(kv.Value), kv.CreateRevision, clientv3.LeaseID(kv.Lease))
	}
	ss.membersChanged()
	return get.Header.Revision, nil
}

// apply folds watched events into the session's view of the group.
func (ss *session) apply(evs []*clientv3.Event) {
	members := len(ss.members)
	changed := false
	for _, ev := range evs {
		key := string(ev.Kv.Key)
		if ev.Type == clientv3.EventTypePut {
			changed = ss.applyPut(key, string(ev.Kv.Value), ev.Kv.CreateRevision, clientv3.LeaseID(ev.Kv.Lease)) || changed
		} else {
			changed = ss.applyDelete(key, ev.Kv.ModRevision) || changed
		}
	}
	if changed || members != len(ss.members) {
		ss.membersChanged()
	}
}

// applyPut records a member or a slot holder; it reports whether the
// members changed.
func (ss *session) applyPut(key, value string, createRev int64, lease clientv3.LeaseID) bool {
	if name, ok := ss.memberName(key); ok {
		had := ss.members[name]
		ss.members[name] = true
		return !had
	}
	if slot, ok := ss.slotOf(key); ok {
		if h, ok := ss.holders[slot]; !ok || h.createRev <= createRev {
			ss.holders[slot] = holder{name: value, createRev: createRev, lease: lease}
		}
	}
	return false
}

// applyDelete forgets a member or a slot holder. A deleted claim of ours
// that we did not release ends the claim at once.
func (ss *session) applyDelete(key string, modRev int64) bool {
	if name, ok := ss.memberName(key); ok {
		had := ss.members[name]
		delete(ss.members, name)
		return had
	}
	slot, ok := ss.slotOf(key)
	if !ok {
		return false
	}
	if h, ok := ss.holders[slot]; ok && h.createRev < modRev {
		delete(ss.holders, slot)
	}
	if c := ss.held[slot]; c != nil && c.Token().Revision < modRev {
		ss.drop(slot, c, ErrClaimLost)
	}
	return false
}

func (ss *session) memberName(key string) (string, bool) {
	return strings.CutPrefix(key, ss.m.cfg.Prefix+"/members/")
}

func (ss *session) slotOf(key string) (int, bool) {
	rest, ok := strings.CutPrefix(key, ss.m.cfg.Prefix+"/slots/")
	if !ok {
		return 0, false
	}
	slot, err := strconv.Atoi(rest)
	if err != nil || slot < 0 || slot >= ss.m.cfg.Slots {
		return 0, false
	}
	return slot, true
}

// membersChanged recomputes the assignment; it costs Slots × members hashes
// and runs only when membership changes.
func (ss *session) membersChanged() {
	names := slices.Sorted(maps.Keys(ss.members))
	ss.m.setMembers(names)
	if ss.assigned == nil {
		ss.assigned = make([]string, ss.m.cfg.Slots)
	}
	for slot := range ss.assigned {
		ss.assigned[slot] = Assign(slot, names)
	}
}
