package source

import (
	"context"
	"sync"

	"github.com/cilium/statedb"
)

// A row that another writer has is left alone, but an item still wants
// it. When that writer deletes the row or gives it up, the item's object
// must be written then, not at the next resync (which etcd sources do
// not run by default). The source watches exactly those rows.

// blockedWaiter waits, on a goroutine of its own, for one of the watched
// rows to change, and then signals freed.
type blockedWaiter struct {
	freed  chan struct{} // cap 1
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// rearm stops the current wait and, if ws has channels, starts one on
// them.
func (b *blockedWaiter) rearm(ctx context.Context, ws *statedb.WatchSet, n int) {
	b.stop()
	if n == 0 {
		return
	}
	ctx, b.cancel = context.WithCancel(ctx)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		if _, err := ws.Wait(ctx, 0); err == nil {
			signal(b.freed)
		}
	}()
}

func (b *blockedWaiter) stop() {
	if b.cancel != nil {
		b.cancel()
		b.cancel = nil
	}
	b.wg.Wait()
}

// watchBlocked (re)arms the wait on the rows another writer has that an
// item of the source wants.
func (s *source[Item, Obj]) watchBlocked(ctx context.Context) {
	if !s.w.blockedDirty {
		return
	}
	s.w.blockedDirty = false
	ws := statedb.NewWatchSet()
	n := 0
	txn := s.db.ReadTxn()
	for _, ps := range s.w.blocked() {
		q, _ := s.w.pk.QueryFromObject(ps.producers[0].obj)
		_, _, watch, _ := s.cfg.Table.GetWatch(txn, q)
		ws.Add(watch)
		n++
	}
	s.blocked.rearm(ctx, ws, n)
}

// settleBlocked settles the rows another writer had once one of them
// changed, and writes only if one became the source's or absent.
func (s *source[Item, Obj]) settleBlocked() {
	rows := s.w.blocked()
	if len(rows) == 0 {
		return
	}
	wtxn := s.db.WriteTxn(s.cfg.Table)
	s.w.mark++
	var c counts
	for _, ps := range rows {
		c.add(s.w.settle(wtxn, ps))
	}
	s.w.report()
	if c.upserts+c.deletes > 0 {
		wtxn.Commit()
	} else {
		wtxn.Abort()
	}
	s.w.blockedDirty = true
	s.synced(func(st *StatusSnapshot) {
		st.Upserts += uint64(c.upserts)
		st.Deletes += uint64(c.deletes)
	})
}

// blocked returns the rows an item wants that another writer has.
func (w *writer[Item, Obj]) blocked() []*pkState[Obj] {
	var out []*pkState[Obj]
	for _, ps := range w.others {
		if ps.other != "" && len(ps.producers) > 0 {
			out = append(out, ps)
		}
	}
	return out
}
