package convergeotel

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/cilium/statedb"
	"go.opentelemetry.io/otel/trace"
)

// MaxLinks is the most writes a Links remembers at once: beyond it, a
// write's trace is not recorded (its attempts link to nothing), so that
// writes nobody reconciles cannot grow it without bound.
const MaxLinks = 1 << 17

// Links remembers, per key, the trace context of the latest traced write
// that asked for a change, so that the attempts it asked for link to it:
// a trace then runs from an HTTP request (or a Kubernetes object's
// traceparent annotation) to the target's call and the status write.
//
// The trace context is captured where the writer has it: Insert (or
// Record after a write) in the writer's context. statedb's commit hooks
// are given the committed snapshot and the names of the tables written,
// not the writer's context, so they cannot tell whose trace a commit
// carries. A link is used by the attempts on the key's revision written
// or a later one, and forgotten once the change is Done (a successful
// attempt at or after it). A write recorded in a transaction that is
// then aborted may lend its trace to the key's next change.
//
// Give one Links to one Tracer (Options.Links); for several reconcilers
// of one table, one Links each. It is safe for concurrent use.
type Links struct {
	mu    sync.Mutex
	byKey map[string]writeLink
	n     atomic.Int64 // len(byKey), read without the lock
}

// writeLink is a traced write: its span context and revision.
type writeLink struct {
	sc  trace.SpanContext
	rev statedb.Revision
}

// NewLinks returns an empty Links.
func NewLinks() *Links { return &Links{byKey: map[string]writeLink{}} }

// Record notes that key (the object's primary key) was written at
// revision rev in ctx's trace. It does nothing when ctx carries no
// sampled span context (a link to a trace nobody records leads nowhere),
// or when MaxLinks writes are remembered already. The attempts of a
// change it recorded are traced whatever Options.Sample says.
func (l *Links) Record(ctx context.Context, key []byte, rev statedb.Revision) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.byKey[string(key)]; !ok && len(l.byKey) >= MaxLinks {
		return
	}
	l.byKey[string(key)] = writeLink{sc: sc, rev: rev}
	l.n.Store(int64(len(l.byKey)))
}

// Insert inserts obj into table in wtxn, as table.Insert does, and
// records ctx's trace for obj's key at the revision of the write.
func Insert[Obj any](ctx context.Context, l *Links, wtxn statedb.WriteTxn, table statedb.RWTable[Obj], obj Obj) (old Obj, hadOld bool, err error) {
	old, hadOld, err = table.Insert(wtxn, obj)
	if err == nil {
		key, _ := table.PrimaryIndexer().ObjectToKey(obj)
		l.Record(ctx, key, table.Revision(wtxn))
	}
	return old, hadOld, err
}

// lookup returns the traced write of key at or before rev.
func (l *Links) lookup(key string, rev statedb.Revision) (trace.SpanContext, bool) {
	if l.n.Load() == 0 {
		return trace.SpanContext{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.byKey[key]
	if !ok || w.rev > rev {
		return trace.SpanContext{}, false
	}
	return w.sc, true
}

// has reports whether key has a traced write remembered.
func (l *Links) has(key string) bool {
	if l == nil || l.n.Load() == 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.byKey[key]
	return ok
}

// done forgets key's traced write at or before rev: its change is Done.
func (l *Links) done(key string, rev statedb.Revision) {
	if l.n.Load() == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w, ok := l.byKey[key]; ok && w.rev <= rev {
		delete(l.byKey, key)
		l.n.Store(int64(len(l.byKey)))
	}
}

// Len returns how many traced writes are remembered.
func (l *Links) Len() int { return int(l.n.Load()) }
