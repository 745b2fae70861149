package leader

import (
	"context"
	"time"

	"github.com/converge-go/converge/etcd/fencing"
)

// Govern puts reconcilers under the elector: they are resumed whenever a
// term starts and suspended when it ends, and suspended at once if no term
// is current. Call it before the hive starts (cell.Invoke), with
// reconcilers constructed with Config.StartSuspended.
//
// Suspended reconcilers stay warm: their tables are fed and their
// outstanding work is kept, so a new term starts operations at once.
// Suspend alone lets in-flight operations finish; the operations must also
// run under Acquire (the engine's Config.Ownership, or Operations) for the
// end of a term to cancel them.
func (e *Elector) Govern(rs ...Governed) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range rs {
		if e.term != nil {
			r.Resume()
		} else {
			r.Suspend()
		}
		e.governed = append(e.governed, r)
	}
}

// Leading reports whether a term is current.
func (e *Elector) Leading() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.term != nil
}

// Token returns the current term's fencing token, and false when not
// leading.
func (e *Elector) Token() (fencing.Token, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.term == nil {
		return fencing.Token{}, false
	}
	return e.term.Token(), true
}

// TermStarted returns when the current term started, and false when not
// leading: every operation of the term started after it.
func (e *Elector) TermStarted() (time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.term == nil {
		return time.Time{}, false
	}
	return e.term.Since(), true
}

// Owns implements Ownership: a leader owns every key and the whole set;
// anyone else, or a leader stopping, owns nothing. It takes a mutex and
// nothing else.
func (e *Elector) Owns([]byte) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.term != nil && !e.term.Draining()
}

// Acquire implements Ownership. When leading, it returns a context derived
// from ctx that carries the term's fencing token (fencing.FromContext) and
// is cancelled as soon as the term ends, with the term's cause
// (ErrLeaseInDoubt, ErrLeadershipLost, ErrStopped) as context.Cause; call
// release once the operation has ended. When not leading it returns
// ok == false and nothing may start.
func (e *Elector) Acquire(ctx context.Context, _ []byte) (context.Context, func(), bool) {
	e.mu.Lock()
	t := e.term
	e.mu.Unlock()
	if t == nil {
		return nil, nil, false
	}
	return t.Start(ctx)
}

// Changed implements Ownership: the channel is closed when a term starts
// or ends.
func (e *Elector) Changed() <-chan struct{} { return e.changed.Changed() }
