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
