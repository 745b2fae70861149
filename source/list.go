package source

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/statedb"
)

// relist lists every item and replaces the source's rows with what the
// list yields, in one write transaction that, the first time, also marks
// the table initializer done. Items are transformed and compared with the
// table on a read snapshot first, on every core, so a relist that changes
// nothing takes no write lock.
func (s *source[Item, Obj]) relist(ctx context.Context, reason RelistReason) error {
	s.status.update(func(st *StatusSnapshot) { st.State = "listing" })
	start := time.Now()
	res, err := s.cfg.ListerWatcher.List(ctx)
	if err != nil {
		s.metrics.Relist(reason, 0, 0, time.Since(start))
		return err
	}
	// Keys the list no longer has are found by generation: compare marks
	// every owned key the list has with this relist's, so no set of a
	// million keys is built. With nothing owned yet (the first list,
	// typically) the map is sized once.
	s.w.gen++
	if len(s.w.owned) == 0 {
		s.w.owned = make(map[string]*owned[Obj], len(res.Items))
	}
	ts, listedFailing, snapRev := s.compare(res.Items)
	seenFailing := make(map[string]bool, len(listedFailing))
	for _, lf := range listedFailing {
		seenFailing[lf.key] = true
		if lf.fine {
			s.w.clearFailing(lf.key)
		}
	}
	for key := range s.w.failing {
		if !seenFailing[key] {
			s.w.clearFailing(key)
		}
	}
	for key, e := range s.w.owned {
		if e.seen.Load() != s.w.gen {
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
		for _, t := range ts {
			c.add(s.w.apply(wtxn, t))
		}
		s.w.trustAbsent = false
		if s.initDone != nil {
			s.initDone(wtxn)
			s.initDone = nil
		}
		wtxn.Commit()
	}
	s.buf.setResume(res.Resume)
	d := time.Since(start)
	s.metrics.Relist(reason, c.upserts, c.deletes, d)
	s.log.Debug("listed", "reason", reason, "items", len(res.Items), "upserts", c.upserts, "deletes", c.deletes, "duration", d)
	s.synced(func(st *StatusSnapshot) {
		st.Initialized = true
		st.State = "watching"
		st.Relists++
		st.Upserts += uint64(c.upserts)
		st.Deletes += uint64(c.deletes)
		st.LastRelist = Relist{At: start, Reason: reason, Duration: d, Items: len(res.Items), Upserts: c.upserts, Deletes: c.deletes}
	})
	return nil
}

// listedFailing is a listed key whose item was failing before; fine says
// it no longer fails and is unchanged (a changed one is settled by apply).
type listedFailing struct {
	key  string
	fine bool
}

// compareChunk is how many items one goroutine of compare takes at least.
const compareChunk = 16384

// compare transforms the items and compares them with what their keys
// produced and with the table, on one read snapshot, and returns the
// items whose objects changed, in list order, the listed keys that were
// failing, and the snapshot's table revision. It marks each owned key it
// sees with the relist's generation (atomically: a list may repeat a
// key) and otherwise only reads, so it runs on every core: a relist of a
// million unchanged items is a million transforms and lookups, and
// allocates nothing per unchanged item but what Transform does.
//
// For a key that produced nothing before, it also notes whether its
// objects are absent from the table (transformed.absent): if the table has
// not changed by the time the write transaction starts (same table
// revision), the write skips that lookup, so an initial list of a million
// objects does its lookups on every core, not under the write lock.
func (s *source[Item, Obj]) compare(items []Keyed[Item]) ([]transformed[Obj], []listedFailing, statedb.Revision) {
	rtxn := s.db.ReadTxn()
	snapRev := s.cfg.Table.Revision(rtxn)
	anyFailing := len(s.w.failing) > 0
	type part struct {
		changed []transformed[Obj]
		failing []listedFailing
	}
	fresh := len(s.w.owned) == 0
	work := func(items []Keyed[Item]) (p part) {
		if fresh { // everything will change: size the result once
			p.changed = make([]transformed[Obj], 0, len(items))
		}
		for _, it := range items {
			var old []Obj
			if e := s.w.owned[it.Key]; e != nil {
				e.seen.Store(s.w.gen)
				old = e.objs
			}
			t := transformed[Obj]{key: it.Key}
			t.objs, t.err = s.w.transform(it.Key, it.Item)
			unchanged := t.err == nil && s.w.unchanged(rtxn, old, t.objs)
			if anyFailing {
				if _, ok := s.w.failing[it.Key]; ok {
					p.failing = append(p.failing, listedFailing{key: it.Key, fine: unchanged})
				}
			}
			if unchanged {
				continue
			}
			if t.err == nil && old == nil {
				t.absent = s.w.absent(rtxn, t.objs)
			}
			p.changed = append(p.changed, t)
		}
		return p
	}
	workers := min(runtime.GOMAXPROCS(0), (len(items)+compareChunk-1)/compareChunk)
	if workers <= 1 {
		p := work(items)
		return p.changed, p.failing, snapRev
	}
	parts := make([]part, workers)
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
	n := 0
	for _, p := range parts {
		n += len(p.changed)
	}
	changed := make([]transformed[Obj], 0, n)
	var failing []listedFailing
	for _, p := range parts {
		changed = append(changed, p.changed...)
		failing = append(failing, p.failing...)
	}
	return changed, failing, snapRev
}
