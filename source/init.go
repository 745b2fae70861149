package source

import (
	"time"

	"github.com/cilium/statedb"
)

// A list with failing items is not a complete desired set: the objects a
// failing item yielded before the process started are in no table, and a
// reconciler that pruned now would remove them from the target. So the
// table initializer stays pending, and Prune and whole-set Syncs wait,
// until every listed item has been read successfully once (or is gone),
// until Config.InitTimeout passes, or until InitializeAnyway is called.
// The good items' objects are written at once: Update does not wait.

// maybeInitialize marks the table initializer done in txn when the source
// has listed and no item blocks it (or the user said to proceed). It
// reports whether it did.
func (s *source[Item, Obj]) maybeInitialize(txn statedb.WriteTxn) bool {
	if s.initDone == nil || !s.listed || (s.w.neverOK > 0 && !s.forceInit) {
		return false
	}
	if s.w.neverOK > 0 {
		s.log.Warn("table initialized although items have never been read: the reconciler may now prune their objects from the target",
			"failing", s.w.neverOK, "reason", s.forceReason)
		s.status.update(func(st *StatusSnapshot) { st.InitForced = s.forceReason })
	}
	s.initDone(txn)
	s.initDone = nil
	return true
}

// initialize gives up waiting for the failing items: it marks the table
// initialized in a transaction of its own.
func (s *source[Item, Obj]) initialize(reason string) {
	if s.initDone == nil {
		return
	}
	s.forceInit, s.forceReason = true, reason
	if !s.listed {
		return // the first list initializes
	}
	wtxn := s.db.WriteTxn(s.cfg.Table)
	s.maybeInitialize(wtxn)
	wtxn.Commit()
	s.synced(func(*StatusSnapshot) {})
}

// initTimer returns the channel of the InitTimeout timer, started by the
// first list that left the table uninitialized; nil when there is none.
func (s *source[Item, Obj]) initTimer() <-chan time.Time {
	if s.initDone == nil || s.cfg.InitTimeout <= 0 || !s.listed {
		return nil
	}
	if s.initT == nil {
		s.initT = time.NewTimer(s.cfg.InitTimeout)
	}
	return s.initT.C
}

// InitializeAnyway implements Source.
func (s *source[Item, Obj]) InitializeAnyway() { signal(s.initNow) }
