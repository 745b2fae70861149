package source

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/statedb"
)

// relist lists every item and replaces the source's rows with what the
// list yields, in one write transaction that, once no listed item is
// failing unread, also marks the table initializer done. Items are
// transformed and compared with the table on a read snapshot first, on
// every core, so a relist that changes nothing takes no write lock.
func (s *source[Item, Obj]) relist(ctx context.Context, reason RelistReason) error {
	s.status.update(func(st *StatusSnapshot) { st.State = "listing" })
	start := time.Now()
	res, err := s.cfg.ListerWatcher.List(ctx)
	if err != nil {
		s.metrics.Relist(reason, 0, 0, time.Since(start))
		return err
	}
	s.buf.contact()
	// Keys the list no longer has are found by generation: compare marks
	// every known key the list has with this relist's, so no set of a
	// million keys is built. With nothing known yet (the first list,
	// typically) the map is sized once.
	s.w.gen++
	if len(s.w.items) == 0 {
		s.w.items = make(map[string]*item[Obj], len(res.Items))
	}
	if len(s.w.rows) == 0 {
		// At least one row an item, typically one: sized once too.
		s.w.rows = make(map[string]*pkState[Obj], len(res.Items))
	}
	ts, snapRev := s.compare(ctx, res.Items)
	if err := ctx.Err(); err != nil {
		// The hive is stopping: transforms may have been cut short.
		return err
	}
	for key, it := range s.w.items {
		if it.seen.Load() != s.w.gen {
			ts = append(ts, transformed[Obj]{key: key, del: true})
		}
	}
	// The table inserts keys in order several times faster than in
	// random order (its radix tree's nodes stay in cache), and the write
	// lock is held that much shorter. Lists from etcd and Kubernetes come
	// sorted already, which the check finds in one pass.
	byKey := func(a, b transformed[Obj]) int { return strings.Compare(a.key, b.key) }
	if !slices.IsSortedFunc(ts, byKey) {
		slices.SortFunc(ts, byKey)
	}
	var c counts
	if len(ts) > 0 || s.initDone != nil {
		wtxn := s.db.WriteTxn(s.cfg.Table)
		// Nothing wrote the table since the compare's snapshot: what was
		// absent then is absent now.
		s.w.trustAbsent = s.cfg.Table.Revision(wtxn) == snapRev
		c = s.w.apply(wtxn, ts)
		s.w.trustAbsent = false
		s.listed = true
		s.maybeInitialize(wtxn)
		wtxn.Commit()
	}
	s.buf.setResume(res.Resume)
	d := time.Since(start)
	s.metrics.Relist(reason, c.upserts, c.deletes, d)
	s.log.Debug("listed", "reason", reason, "items", len(res.Items), "upserts", c.upserts, "deletes", c.deletes, "duration", d)
	s.synced(func(st *StatusSnapshot) {
		st.State = "watching"
		st.Relists++
		st.Upserts += uint64(c.upserts)
		st.Deletes += uint64(c.deletes)
		st.LastRelist = Relist{At: start, Reason: reason, Duration: d, Items: len(res.Items), Upserts: c.upserts, Deletes: c.deletes}
	})
	return nil
}

// compareChunk is how many items one goroutine of compare takes at least.
const compareChunk = 16384

// compare transforms the items and compares them with what their keys
// yield and with the table, on one read snapshot, and returns the items
// that must be applied, in list order, and the snapshot's table
// revision. It marks each known key it sees with the relist's generation
// (atomically: a list may repeat a key) and otherwise only reads, so it
// runs on every core: a relist of a million unchanged items is a million
// transforms and lookups, and allocates nothing per unchanged item but
// what Transform does. An item the ListerWatcher marks Unchanged is not
// transformed at all. Once ctx ends it stops early; relist then writes
// nothing.
//
// For a key that yielded nothing before, it also notes whether its
// objects are absent from the table (transformed.absent): if the table has
// not changed by the time the write transaction starts (same table
// revision), the write skips that lookup, so an initial list of a million
// objects does its lookups on every core, not under the write lock.
func (s *source[Item, Obj]) compare(ctx context.Context, items []Keyed[Item]) ([]transformed[Obj], statedb.Revision) {
	rtxn := s.db.ReadTxn()
	snapRev := s.cfg.Table.Revision(rtxn)
	fresh := len(s.w.items) == 0
	work := func(items []Keyed[Item]) (changed []transformed[Obj]) {
		if fresh { // everything will change: size the result once
			changed = make([]transformed[Obj], 0, len(items))
		}
		for i, k := range items {
			if i%256 == 255 && ctx.Err() != nil {
				return nil // stopping: relist checks ctx and writes nothing
			}
			if t, ok := s.compareOne(rtxn, k); ok {
				changed = append(changed, t)
			}
		}
		return changed
	}
	workers := min(runtime.GOMAXPROCS(0), (len(items)+compareChunk-1)/compareChunk)
	if workers <= 1 {
		return work(items), snapRev
	}
	parts := make([][]transformed[Obj], workers)
	per := (len(items) + workers - 1) / workers
	var wg sync.WaitGroup
	for i := range parts {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			parts[i] = work(items[min(i*per, len(items)):min((i+1)*per, len(items))])
		}(i)
	}
	wg.Wait()
	return slices.Concat(parts...), snapRev
}

// compareOne is compare's work on one listed item: its outcome, and
// whether it must be applied.
func (s *source[Item, Obj]) compareOne(rtxn statedb.ReadTxn, k Keyed[Item]) (transformed[Obj], bool) {
	it := s.w.items[k.Key]
	if it != nil {
		it.seen.Store(s.w.gen)
	}
	t := transformed[Obj]{key: k.Key}
	switch {
	case k.Unchanged && it != nil && it.err != "":
		t.err = errors.New(it.err)
	case k.Unchanged && it != nil:
		// Its objects are known; a row of them may need settling
		// again (another writer, another item).
		t.objs = it.objs
	default:
		t.objs, t.err = s.w.transform(k.Key, k.Item)
	}
	switch {
	case t.err == nil && s.w.unchanged(rtxn, it, t.objs):
		return t, false
	case t.err != nil && it != nil && it.err == t.err.Error() && s.w.settled(rtxn, it):
		return t, false // failing as before, its kept rows untouched
	case k.Unchanged && t.err == nil:
		t.objs = slices.Clone(t.objs)
	}
	if t.err == nil && it == nil {
		t.absent = s.w.absent(rtxn, t.objs)
	}
	return t, true
}
