package shard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
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
}

// View is the cluster-wide view: every live replica's summary and whether
// the whole desired set is done.
type View struct {
	// Slots is the group's slot count; Claimed how many are claimed now.
	Slots, Claimed int
	// Unowned lists the slots nobody has claimed (moving, or no members).
	Unowned []int
	// Moving lists the slots whose claim and owner's summary disagree:
	// a handover is under way or the summary is not yet republished.
	Moving []int
	// Replicas are the live replicas' summaries, by name.
	Replicas []Summary
	// Objects sums the replicas' counts.
	Objects reconciler.ObjectCounts
	// Done: every slot is claimed by a replica whose summary lists it, and
	// no replica reports objects Pending, Refreshing or in Error, or
	// operations in flight.
	Done bool
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
	next := Summary{Name: m.cfg.Name, Slots: m.Owned()}
	if next.Slots == nil {
		next.Slots = []int{}
	}
	if m.cfg.Report != nil {
		next.Report = m.cfg.Report()
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

// ReadView reads the cluster-wide view of the group at prefix in one
// consistent read. It fails only when etcd does.
func ReadView(ctx context.Context, cli *clientv3.Client, prefix string) (View, error) {
	resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return View{}, fmt.Errorf("read %s: %w", prefix, err)
	}
	var v View
	claims := map[int]string{}
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		switch {
		case key == prefix+"/slots":
			_, _ = fmt.Sscan(string(kv.Value), &v.Slots)
		case strings.HasPrefix(key, prefix+"/slots/"):
			var slot int
			if _, err := fmt.Sscan(strings.TrimPrefix(key, prefix+"/slots/"), &slot); err == nil {
				claims[slot] = string(kv.Value)
			}
		case strings.HasPrefix(key, prefix+"/summary/"):
			var s Summary
			if json.Unmarshal(kv.Value, &s) == nil {
				v.Replicas = append(v.Replicas, s)
			}
		}
	}
	v.fold(claims)
	return v, nil
}

func (v *View) fold(claims map[int]string) {
	listed := map[int]string{}
	busy := false
	for _, s := range v.Replicas {
		for _, slot := range s.Slots {
			listed[slot] = s.Name
		}
		r := s.Report
		v.Objects.Pending += r.Objects.Pending
		v.Objects.Refreshing += r.Objects.Refreshing
		v.Objects.Done += r.Objects.Done
		v.Objects.Error += r.Objects.Error
		busy = busy || r.InFlight > 0 || r.Retries > 0
	}
	for slot := range v.Slots {
		owner, claimed := claims[slot]
		switch {
		case !claimed:
			v.Unowned = append(v.Unowned, slot)
		case listed[slot] != owner:
			v.Moving = append(v.Moving, slot)
		}
	}
	v.Claimed = len(claims)
	v.Done = v.Slots > 0 && len(v.Unowned) == 0 && len(v.Moving) == 0 && !busy &&
		v.Objects.Pending == 0 && v.Objects.Refreshing == 0 && v.Objects.Error == 0
}

// ViewHandler serves ReadView of the group at prefix as JSON: 200 when the
// whole desired set is done, 503 otherwise (so a probe can wait on it), and
// 502 when etcd cannot be read.
func ViewHandler(cli *clientv3.Client, prefix string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := ReadView(r.Context(), cli, prefix)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if !v.Done {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(v)
	})
}
