package source

import (
	"context"
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
			if t.err == nil && s.w.unchanged(rtxn, ev.Key, t.objs) {
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
	// With nothing owned yet (the first list, typically) no row can be
	// missing from the list: skip the bookkeeping for deletes, and size
	// the maps once.
	fresh := len(s.w.owned) == 0 && len(s.w.failing) == 0
	var seen map[string]struct{}
	var ts []transformed[Obj]
	if fresh {
		ts = make([]transformed[Obj], 0, len(res.Items))
		s.w.owned = make(map[string][]Obj, len(res.Items))
	} else {
		seen = make(map[string]struct{}, len(res.Items))
	}
	rtxn := s.db.ReadTxn()
	for _, it := range res.Items {
		if !fresh {
			seen[it.Key] = struct{}{}
		}
		objs, err := s.w.transform(it.Key, it.Item)
		if err == nil && s.w.unchanged(rtxn, it.Key, objs) {
			if s.w.failing[it.Key] != "" {
				s.w.clearFailing(it.Key)
			}
			continue
		}
		ts = append(ts, transformed[Obj]{key: it.Key, objs: objs, err: err})
	}
	if !fresh {
		for key := range s.w.owned {
			if _, ok := seen[key]; !ok {
				ts = append(ts, transformed[Obj]{key: key, del: true})
			}
		}
		for key := range s.w.failing {
			if _, ok := seen[key]; !ok {
				s.w.clearFailing(key)
			}
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
