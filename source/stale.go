package source

import (
	"context"
	"time"
)

// watchStaleness reports health whenever the source becomes stale (no
// contact with its store for Config.StaleAfter) or stops being so. It
// runs beside the source's goroutine, because that one may be blocked in
// a List that a dead store never answers. The returned function stops it
// and waits for it.
func (s *source[Item, Obj]) watchStaleness(ctx context.Context) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(s.cfg.StaleAfter)
		defer t.Stop()
		wasStale := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			snap := s.Status()
			if stale := snap.Stale(); stale != wasStale {
				wasStale = stale
				s.reportHealth()
			}
			// While stale, look again soon so that a contact (which may
			// be a Bookmark that commits nothing) turns health OK again;
			// otherwise wake when the bound would pass.
			next := s.cfg.StaleAfter / 4
			if !wasStale {
				next = snap.contact().Add(s.cfg.StaleAfter).Sub(snap.UpdatedAt) + time.Millisecond
			}
			t.Reset(max(next, time.Millisecond))
		}
	}()
	return func() { cancel(); <-done }
}
