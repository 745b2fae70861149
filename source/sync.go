package source

import (
	"context"
	"time"
)

// commit applies the buffered events in one write transaction and returns
// how many it took. Transforms run before the write lock is taken; a batch
// that changes nothing takes no write transaction at all. When ctx ends
// meanwhile (the hive stops), the batch is dropped, not written: a
// Transform may have been abandoned (dirsource gives up a decode at
// Stop), and the next run lists again anyway.
func (s *source[Item, Obj]) commit(ctx context.Context) int {
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
		it := s.w.items[ev.Key]
		if ev.Kind == Delete {
			if it == nil {
				continue
			}
			t.del = true
		} else {
			t.objs, t.err = s.w.transform(ev.Key, ev.Item)
			if t.err == nil && s.w.unchanged(rtxn, it, t.objs) {
				continue
			}
		}
		ts = append(ts, t)
	}
	if ctx.Err() != nil {
		return 0
	}
	var c counts
	if len(ts) > 0 {
		wtxn := s.db.WriteTxn(s.cfg.Table)
		c = s.w.apply(wtxn, ts)
		inited := s.maybeInitialize(wtxn)
		if c.upserts+c.deletes > 0 || inited {
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
		st.Items = len(s.w.items)
		st.Objects = s.w.nObjects
		st.Initialized = s.initDone == nil
		st.NeverRead = s.w.neverOK
		if dirty {
			st.Failing = failing
			st.FailingCount = len(s.w.failing)
		}
	})
	s.reportHealth()
}
