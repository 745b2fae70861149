package lease

import "time"

// Terms returns when this elector's terms started and ended, in order:
// even entries are starts, odd ones ends.
func (e *Elector) Terms() []time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]time.Time, len(e.history))
	for i, tr := range e.history {
		out[i] = tr.at
	}
	return out
}

// OwnedSpan is a stretch of time a Sharder owned a slot, as Owns
// answered: End is zero while it still does.
type OwnedSpan struct {
	Slot       int
	Start, End time.Time
}

// Spans returns the sharder's ownership history, in order of start.
func (m *Sharder) Spans() []OwnedSpan {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]OwnedSpan, len(m.spans))
	for i, s := range m.spans {
		out[i] = OwnedSpan{Slot: s.slot, Start: s.start, End: s.end}
	}
	return out
}
