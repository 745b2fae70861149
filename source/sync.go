package source

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// commit applies the buffered events in one write transaction and returns
// how many it took. Transforms run before the write lock is taken; a batch
// that changes nothing takes no write transaction at all.
func (s *source[Item, Obj]) commit() int {
	b := s.buf.drain()
	s.metrics.Lag(time.Time{})
	if len(b.events) == 0 {
		return 0
	}
	start := time.Now()
	ts := make([]transformed[Obj], 0, len(b.events))
	rtxn := s.db.ReadTxn()
	for _, ev := range b.events {
		t := transformed[Obj]{key: ev.Key}
		if ev.Kind == Delete {
			if _, ok := s.w.owned[ev.Key]; !ok && s.w.failing[ev.Key] == "" {
				continue
			}
			t.del = true
		} else {
			t.objs, t.err = s.w.transform(ev.Key, ev.Item)
			if t.err == nil && s.w.unchanged(rtxn, s.w.objsOf(ev.Key), t.objs) {
				if s.w.failing[ev.Key] != "" {
					s.w.clearFailing(ev.Key)
				}
				continue
			}
		}
		ts = append(ts, t)
	}
	var c counts
	if len(ts) > 0 {
		wtxn := s.db.WriteTxn(s.cfg.Table)
		for _, t := range ts {
			c.add(s.w.apply(wtxn, t))
		}
		if c.upserts+c.deletes > 0 {
			wtxn.Commit()
		} else {
			wtxn.Abort()
		}
	}
	s.metrics.Commit(c.upserts, c.deletes, time.Since(start))
	s.synced(func(st *StatusSnapshot) {
		st.Events += uint64(len(b.events))
		st.Commits++
		st.Upserts += uint64(c.upserts)
		st.Deletes += uint64(c.deletes)
	})
	return len(b.events)
}

// relist lists every item and replaces the source's rows with what the
// list yields, in one write transaction that, the first time, also marks
// the table initializer done. Items are transformed and compared with the
// table on a read snapshot first, so a relist that changes nothing takes
// no write lock.
func (s *source[Item, Obj]) relist(ctx context.Context, reason RelistReason) error {
	s.status.update(func(st *StatusSnapshot) { st.State = "listing" })
	start := time.Now()
	res, err := s.cfg.ListerWatcher.List(ctx)
	if err != nil {
		s.metrics.Relist(reason, 0, 0, time.Since(start))
		return err
	}
	// Keys the list no longer has are found by generation: every owned
	// key the list has is marked with this relist's, so no set of a
	// million keys is built. With nothing owned yet (the first list,
	// typically) there is nothing to find, and the maps are sized once.
	s.w.gen++
	fresh := len(s.w.owned) == 0
	var ts []transformed[Obj]
	if fresh {
		ts = make([]transformed[Obj], 0, len(res.Items))
		s.w.owned = make(map[string]*owned[Obj], len(res.Items))
	}
	var seenFailing map[string]bool
	if len(s.w.failing) > 0 {
		seenFailing = map[string]bool{}
	}
	for i, r := range s.compare(res.Items) {
		key := res.Items[i].Key
		if r.owner != nil {
			r.owner.seen = s.w.gen
		}
		if seenFailing != nil {
			if _, ok := s.w.failing[key]; ok {
				seenFailing[key] = true
			}
		}
		if !r.changed {
			if s.w.failing[key] != "" {
				s.w.clearFailing(key)
			}
			continue
		}
		ts = append(ts, r.t)
	}
	for key, e := range s.w.owned {
		if e.seen != s.w.gen {
			ts = append(ts, transformed[Obj]{key: key, del: true})
		}
	}
	for key := range s.w.failing {
		if !seenFailing[key] {
			s.w.clearFailing(key)
		}
	}
	var c counts
	if len(ts) > 0 || s.initDone != nil {
		wtxn := s.db.WriteTxn(s.cfg.Table)
		for _, t := range ts {
			c.add(s.w.apply(wtxn, t))
		}
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

// listed is one list item compared with the table.
type listed[Obj any] struct {
	owner   *owned[Obj] // what the key produced before, if anything
	t       transformed[Obj]
	changed bool // applying t would write something
}

// compareChunk is how many items one goroutine of compare takes at least.
const compareChunk = 16384

// compare transforms the items and compares them with what their keys
// produced and with the table, on one read snapshot. It reads the owned
// map but writes nothing shared, so it runs on every core: a relist of a
// million unchanged items is a million transforms and lookups.
func (s *source[Item, Obj]) compare(items []Keyed[Item]) []listed[Obj] {
	out := make([]listed[Obj], len(items))
	rtxn := s.db.ReadTxn()
	work := func(from, to int) {
		for i := from; i < to; i++ {
			it := items[i]
			r := listed[Obj]{owner: s.w.owned[it.Key], t: transformed[Obj]{key: it.Key}}
			var old []Obj
			if r.owner != nil {
				old = r.owner.objs
			}
			r.t.objs, r.t.err = s.w.transform(it.Key, it.Item)
			r.changed = r.t.err != nil || !s.w.unchanged(rtxn, old, r.t.objs)
			out[i] = r
		}
	}
	workers := min(runtime.GOMAXPROCS(0), (len(items)+compareChunk-1)/compareChunk)
	if workers <= 1 {
		work(0, len(items))
		return out
	}
	var wg sync.WaitGroup
	per := (len(items) + workers - 1) / workers
	for from := 0; from < len(items); from += per {
		wg.Add(1)
		go func(from, to int) {
			defer wg.Done()
			work(from, to)
		}(from, min(from+per, len(items)))
	}
	wg.Wait()
	return out
}

// synced records a successful sync with fn's changes, refreshes the
// counts and failing items, and reports health.
func (s *source[Item, Obj]) synced(fn func(st *StatusSnapshot)) {
	now := time.Now()
	var failing []ItemError
	for range s.w.failingNew {
		s.metrics.Error(StageTransform)
	}
	s.w.failingNew = 0
	dirty := s.w.failingDirty
	if dirty {
		failing = failingList(s.w.failing)
		s.w.failingDirty = false
	}
	s.status.update(func(st *StatusSnapshot) {
		fn(st)
		st.LastSync = now
		st.Items = len(s.w.owned)
		st.Objects = s.w.nObjects
		if dirty {
			st.Failing = failing
			st.FailingCount = len(s.w.failing)
		}
	})
	s.reportHealth()
}
