package main

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/etcd/shard"
	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
)

// coverageEvery is how often the source's status is sampled to establish
// which desired revision the table holds.
const coverageEvery = 50 * time.Millisecond

// reporter gives the replica's summary (shard's, or the leader's) the
// counts of the groups it owns and the desired revision they cover. The
// reconciler and the source are constructed after the Manager, so their
// fields are set at registration, before the hive starts.
type reporter struct {
	rec    atomic.Pointer[reconciler.Reconciler[*Group]]
	src    source.Source
	db     *statedb.DB
	groups statedb.Table[*Group]
	sc     scopes

	// covered is the newest desired revision (etcd's) the table is known
	// to hold every change up to: established by trackCoverage, it only
	// grows.
	covered atomic.Int64
}

// report counts, in one read of the table, the groups of the scopes this
// replica owns by their status, and says which desired revision the
// counts cover. It reads the table, not the reconciler's own counts: the
// source writes a changed group Pending in the same transaction as the
// change, so a table that holds a change counts it as not done, whatever
// the reconciler has read yet. A group Done before its scope was claimed
// here is counted Pending: the new owner applies it again (another owner
// may have changed the fleet meanwhile), and until then it is not known
// done. Cost: one pass over the table (the example's tables are small).
func (r *reporter) report() shard.Report {
	p := r.rec.Load()
	if p == nil || r.db == nil {
		return shard.Report{}
	}
	// Coverage first: it was established before this read of the table,
	// so the table read holds everything up to it.
	rep := shard.Report{Covers: r.covered.Load()}
	owned := map[int]time.Time{}
	for _, s := range r.sc.owned() {
		if since, ok := r.sc.since(s); ok {
			owned[s] = since
		}
	}
	for g := range r.groups.All(r.db.ReadTxn()) {
		since, ok := owned[r.sc.of(g.Name)]
		if !ok {
			rep.Objects.Unowned++
			continue
		}
		switch g.Status.Kind {
		case reconciler.StatusKindDone:
			if g.Status.UpdatedAt.Before(since) {
				rep.Objects.Pending++
			} else {
				rep.Objects.Done++
			}
		case reconciler.StatusKindError:
			rep.Objects.Error++
		case reconciler.StatusKindRefreshing:
			rep.Objects.Refreshing++
		case reconciler.StatusKindUnset:
			rep.Objects.Unset++ // left alone until set Pending
		default:
			rep.Objects.Pending++
		}
	}
	st := (*p).Status()
	rep.InFlight, rep.Retries = st.InFlight, st.Retries
	return rep
}

// trackCoverage establishes, until ctx ends, which desired revision the
// table holds every change up to. The source's status says which revision
// it has received up to (Resume) and how many keys wait in its buffer
// (Pending); a batch taken out of the buffer is in the table once the
// source's commit ends, which counts it (Commits). Two samples
// coverageEvery apart with nothing pending, the same resume point and the
// same number of commits mean no batch was between the buffer and the
// table at the first: everything up to the resume point is in the table.
//
// A commit that took longer than coverageEvery, straddling both samples,
// would be missed; the source's commits are in-memory writes of a
// millisecond or so.
func (r *reporter) trackCoverage(ctx context.Context) {
	ticker := time.NewTicker(coverageEvery)
	defer ticker.Stop()
	var prev source.StatusSnapshot
	for {
		s := r.src.Status()
		if s.Pending == 0 && prev.Pending == 0 && s.Resume != "" && s.Resume == prev.Resume && s.Commits == prev.Commits {
			if rev, err := strconv.ParseInt(s.Resume, 10, 64); err == nil && rev > r.covered.Load() {
				r.covered.Store(rev)
			}
		}
		prev = s
		select {
		case <-ticker.C:
		case <-ctx.Done():
			return
		}
	}
}
