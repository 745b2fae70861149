package shard

import (
	"encoding/json"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/reconciler"
)

// Report is what a replica's reconcilers say about the keys it owns, for
// its Summary. Config.Report returns it; reconciler.Reconciler.Status has
// every field.
type Report struct {
	// Objects counts the owned objects by status.
	Objects reconciler.ObjectCounts `json:"objects"`
	// InFlight is the number of operations running now.
	InFlight int `json:"in-flight"`
	// Retries is the number of objects waiting for a retry.
	Retries int `json:"retries"`
	// Covers is the revision of the desired state (in etcd, where the
	// replica's table is fed from) that these counts include: every
	// change of the desired state up to it is in the table they were
	// counted from. 0: not known. The view is Done only when every owner's
	// summary covers the desired state it reads.
	Covers int64 `json:"covers"`
}

// Summary is what one replica publishes about itself at
// Prefix/summary/<Name>, under its lease: it vanishes with the replica.
// It is small (the slot list and a few counts) whatever the number of
// objects.
type Summary struct {
	Name      string    `json:"name"`
	Slots     []int     `json:"slots"`
	Report    Report    `json:"report"`
	UpdatedAt time.Time `json:"updated-at"`
	// Revision is the etcd revision the summary was written at; ReadView
	// fills it in (it is not published).
	Revision int64 `json:"revision,omitempty"`
}

// publisher decides when a replica republishes its summary: at once when
// its slots change, else at most once per interval when its report does.
type publisher struct {
	last     Summary
	lastAt   time.Time
	interval time.Duration
}

func (p *publisher) due(next Summary, now time.Time) bool {
	if p.lastAt.IsZero() || !slices.Equal(next.Slots, p.last.Slots) {
		return true
	}
	return next.Report != p.last.Report && now.Sub(p.lastAt) >= p.interval
}

// publish writes the summary if it is due.
func (ss *session) publish() {
	m := ss.m
	next := Summary{Name: m.cfg.Name, Slots: orEmpty(m.Owned())}
	if m.cfg.Report != nil {
		next.Report = m.cfg.Report()
		// The counts must be of the slots listed: a slot gained or
		// dropped while Report ran would be listed without its objects
		// counted, or the other way round. Publish at the next turn.
		if !slices.Equal(next.Slots, orEmpty(m.Owned())) {
			return
		}
	}
	now := time.Now()
	if !ss.pub.due(next, now) {
		return
	}
	next.UpdatedAt = now
	b, err := json.Marshal(next)
	if err != nil {
		return // a Summary always marshals
	}
	key := m.cfg.Prefix + "/summary/" + m.cfg.Name
	ctx, cancel := ss.call()
	defer cancel()
	if _, err := ss.cli.Put(ctx, key, string(b), clientv3.WithLease(ss.s.Lease())); err != nil {
		m.log.Warn("shards: publishing the summary failed", "error", err)
		return
	}
	ss.pub.last, ss.pub.lastAt = next, now
}

func orEmpty(slots []int) []int {
	if slots == nil {
		return []int{}
	}
	return slots
}
