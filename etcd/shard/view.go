package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/reconciler"
)

// View is the cluster-wide view: every live replica's summary and whether
// the whole desired set is done.
type View struct {
	// Slots is the group's slot count; Claimed how many are claimed now.
	Slots   int `json:"slots"`
	Claimed int `json:"claimed"`
	// Unowned lists the slots no live member holds: unclaimed (moving, no
	// members), or claimed by a member whose member key is gone.
	Unowned []int `json:"unowned,omitempty"`
	// Moving lists the slots whose owner's summary does not list them or
	// was written before the claim: a handover is under way, or the new
	// owner has not yet reported on the slot.
	Moving []int `json:"moving,omitempty"`
	// Replicas are the live replicas' summaries, by name.
	Replicas []Summary `json:"replicas"`
	// Objects sums the replicas' counts.
	Objects reconciler.ObjectCounts `json:"objects"`
	// Revision is the etcd revision the view was read at.
	Revision int64 `json:"revision"`
	// Covered: every owner's summary covers the desired state as of
	// Revision (its Report.Covers is at or after the last change of the
	// desired keys).
	Covered bool `json:"covered"`
	// Done: every slot is claimed by a live member whose summary lists it
	// and is newer than the claim, every such summary is Covered, and
	// none reports objects Pending, Refreshing or in Error, operations in
	// flight or retries waiting.
	Done bool `json:"done"`
}

// claimSeen is one slot's claim key as a view reads it.
type claimSeen struct {
	owner string
	rev   int64 // create revision
}

// viewPageSize is how many desired keys one read of ReadView returns at
// most: the desired state may hold millions of keys.
var viewPageSize int64 = 10000

// ReadView reads the cluster-wide view of the group at prefix, whose
// desired state is the keys under desired, in one consistent read of the
// group's keys and the number of desired keys; then, to tell whether the
// desired state changed since the oldest revision the summaries cover,
// the number of desired keys then and, if it is the same, the desired
// keys now (keys only, in pages of at most viewPageSize) until one is
// newer. It fails only when etcd does.
func ReadView(ctx context.Context, cli *clientv3.Client, prefix, desired string) (View, error) {
	resp, err := cli.Txn(ctx).Then(
		clientv3.OpGet(prefix+"/", clientv3.WithPrefix()),
		clientv3.OpGet(desired, clientv3.WithPrefix(), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return View{}, fmt.Errorf("read %s: %w", prefix, err)
	}
	v := View{Revision: resp.Header.Revision}
	claims := map[int]claimSeen{}
	live := map[string]bool{}
	for _, kv := range resp.Responses[0].GetResponseRange().GetKvs() {
		v.readKey(prefix, kv, claims, live)
	}
	v.fold(claims, live)
	covers := v.minCovers()
	if covers > 0 {
		count := resp.Responses[1].GetResponseRange().GetCount()
		v.Covered, err = unchangedSince(ctx, cli, desired, covers, v.Revision, count)
		if err != nil {
			return View{}, err
		}
	}
	v.Done = v.Done && v.Covered
	return v, nil
}

func (v *View) readKey(prefix string, kv *mvccpb.KeyValue, claims map[int]claimSeen, live map[string]bool) {
	key := string(kv.Key)
	switch {
	case key == prefix+"/slots":
		v.Slots, _ = strconv.Atoi(string(kv.Value))
	case strings.HasPrefix(key, prefix+"/slots/"):
		if slot, err := strconv.Atoi(strings.TrimPrefix(key, prefix+"/slots/")); err == nil {
			claims[slot] = claimSeen{owner: string(kv.Value), rev: kv.CreateRevision}
		}
	case strings.HasPrefix(key, prefix+"/members/"):
		live[strings.TrimPrefix(key, prefix+"/members/")] = true
	case strings.HasPrefix(key, prefix+"/summary/"):
		var s Summary
		if json.Unmarshal(kv.Value, &s) == nil {
			s.Revision = kv.ModRevision
			v.Replicas = append(v.Replicas, s)
		}
	}
}

// fold sets everything but Covered, and Done as if covered.
func (v *View) fold(claims map[int]claimSeen, live map[string]bool) {
	byName := map[string]Summary{}
	busy := false
	for _, s := range v.Replicas {
		byName[s.Name] = s
		r := s.Report
		v.Objects.Pending += r.Objects.Pending
		v.Objects.Refreshing += r.Objects.Refreshing
		v.Objects.Done += r.Objects.Done
		v.Objects.Error += r.Objects.Error
		v.Objects.Unset += r.Objects.Unset // ask nothing: no bar to Done
		busy = busy || r.InFlight > 0 || r.Retries > 0
	}
	for slot := range v.Slots {
		c, claimed := claims[slot]
		s, reported := byName[c.owner]
		switch {
		case !claimed || !live[c.owner]:
			v.Unowned = append(v.Unowned, slot)
		case !reported || s.Revision <= c.rev || !listed(s.Slots, slot):
			v.Moving = append(v.Moving, slot)
		}
	}
	v.Claimed = len(claims)
	v.Done = v.Slots > 0 && len(v.Unowned) == 0 && len(v.Moving) == 0 && !busy &&
		v.Objects.Pending == 0 && v.Objects.Refreshing == 0 && v.Objects.Error == 0
}

func listed(slots []int, slot int) bool {
	for _, s := range slots {
		if s == slot {
			return true
		}
	}
	return false
}

// minCovers returns the oldest desired revision a summary that lists
// slots covers: 0 when one does not know, or when none lists any.
func (v *View) minCovers() int64 {
	var oldest int64
	for _, s := range v.Replicas {
		if len(s.Slots) == 0 {
			continue
		}
		if c := s.Report.Covers; c <= 0 {
			return 0
		} else if oldest == 0 || c < oldest {
			oldest = c
		}
	}
	return oldest
}

// unchangedSince reports whether the desired keys at revision at (count
// of them) are those at revision since: then no change of the desired
// state, delete included, happened after since. They are when as many
// keys were there at since and none of the keys at at was written after
// since (a key written after since is a change; with none, every key at
// at was there at since, unchanged, and the same count leaves no room
// for a deleted one). The keys are read in pages, and only until the
// first newer one. A compacted since is an unknown, not a failure: false.
func unchangedSince(ctx context.Context, cli *clientv3.Client, desired string, since, at, count int64) (bool, error) {
	if since >= at {
		return true, nil
	}
	then, err := cli.Get(ctx, desired, clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithRev(since))
	if err != nil {
		if errors.Is(err, rpctypes.ErrCompacted) {
			return false, nil
		}
		return false, fmt.Errorf("read %s at %d: %w", desired, since, err)
	}
	if then.Count != count {
		return false, nil
	}
	from, end := desired, clientv3.GetPrefixRangeEnd(desired)
	for {
		page, err := cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithRev(at),
			clientv3.WithKeysOnly(), clientv3.WithLimit(viewPageSize))
		if err != nil {
			return false, fmt.Errorf("read %s at %d: %w", desired, at, err)
		}
		for _, kv := range page.Kvs {
			if kv.ModRevision > since {
				return false, nil
			}
		}
		if !page.More || len(page.Kvs) == 0 {
			return true, nil
		}
		from = string(page.Kvs[len(page.Kvs)-1].Key) + "\x00"
	}
}

// ViewHandler serves ReadView of the group at prefix, with its desired
// state under desired, as JSON: 200 when the whole desired set is done,
// 503 otherwise (so a probe can wait on it), and 502 when etcd cannot be
// read. It reads one view at a time, whatever the number of clients
// polling it: requests that come while a read is in progress share the
// next one (never that one, which may have started before the change a
// client waits for).
func ViewHandler(cli *clientv3.Client, prefix, desired string) http.Handler {
	var f flight
	read := func(ctx context.Context) (View, error) { return ReadView(ctx, cli, prefix, desired) }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := f.do(r.Context(), read)
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
