package convergeotel

import (
	"sync/atomic"

	"github.com/converge-go/converge/reconciler"
)

// The head sampler (Options.Sample): the Tracer declines, before the
// engine builds anything, the attempts nobody will see, so that a
// sampler that samples little costs little.

// WantsAttempt implements reconciler.AttemptFilter: the attempts of a
// change whose write Links recorded and the retries of an attempt the
// Tracer holds are wanted; the others as Options.Sample says (all
// without it).
func (t *Tracer) WantsAttempt(a reconciler.Attempt) bool {
	if t.sample == nil || t.links.has(a.Key) || t.live.Load() > 0 && t.holds(a.Key) {
		return true
	}
	if t.sample(a) {
		return true
	}
	t.forgetBlocked(a.Key) // no started event comes to take it
	return false
}

// holds reports whether the Tracer holds key's spans (a sampled attempt).
func (t *Tracer) holds(key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.keys[key] != nil
}

// OneIn returns a head sampler (Options.Sample) that takes one attempt in
// n, counting the attempts it is asked about (a retry of a sampled
// attempt is not asked: it is traced). n of 1 or less takes every one;
// use a func that returns false to take none.
func OneIn(n int) func(reconciler.Attempt) bool {
	if n <= 1 {
		return func(reconciler.Attempt) bool { return true }
	}
	var count atomic.Uint64
	return func(reconciler.Attempt) bool { return count.Add(1)%uint64(n) == 1 }
}
