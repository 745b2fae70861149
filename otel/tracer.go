package convergeotel

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/converge-go/converge/reconciler"
)

// ScopeName is the instrumentation scope of the spans a Tracer makes.
const ScopeName = "github.com/converge-go/converge/otel"

// The span names.
const (
	SpanAttempt = "converge.attempt"
	SpanCommit  = "converge.commit"
	SpanSync    = "converge.sync"
)

// The attribute keys of the spans.
const (
	AttrReconciler = attribute.Key("converge.reconciler")
	AttrKey        = attribute.Key("converge.key")
	AttrAttempt    = attribute.Key("converge.attempt")
	AttrOp         = attribute.Key("converge.op")
	AttrClass      = attribute.Key("converge.class")
	AttrPriority   = attribute.Key("converge.priority")
	AttrTarget     = attribute.Key("converge.target")
	AttrQueueWait  = attribute.Key("converge.queue_wait_seconds")
	AttrWorker     = attribute.Key("converge.worker")
	AttrResult     = attribute.Key("converge.result")
	AttrDuration   = attribute.Key("converge.duration_seconds")
	AttrCommit     = attribute.Key("converge.commit")
	AttrStatus     = attribute.Key("converge.status")
	AttrRetryAt    = attribute.Key("converge.retry_at")
	AttrGivenUp    = attribute.Key("converge.given_up")
	AttrObjects    = attribute.Key("converge.objects")
	AttrLink       = attribute.Key("converge.link") // on a link: "write" or "previous-attempt"
)

// Options configure a Tracer.
type Options struct {
	// TracerProvider makes the spans. Default: otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Links, if set, links each attempt to the trace of the write that
	// asked for it (see Links).
	Links *Links
	// Reconciler names the reconciler in every span (converge.reconciler):
	// its Config.Name, or what tells it apart.
	Reconciler string
	// Sample, if set, is a head sampler: asked just before an attempt
	// starts, it decides whether the attempt is traced at all. An attempt
	// it declines costs nothing more: the engine builds no event for it
	// (reconciler.AttemptFilter) and no span is started; the attempts it
	// takes go to the TracerProvider's sampler as before. It is not asked,
	// and the attempt is traced, for a retry of an attempt the Tracer
	// holds (one the TracerProvider sampled, until its change is Done or
	// given up on) and for a change whose write Links recorded (in a
	// sampled trace). It is called on the reconciler's workers, at once
	// from several: keep it quick. OneIn samples one attempt in n. Nil
	// (the default): every attempt goes to the TracerProvider's sampler.
	Sample func(reconciler.Attempt) bool
}

// Tracer is a reconciler.Observer that makes OpenTelemetry spans of a
// reconciler's attempts (see the package doc). Give each reconciler its
// own (Config.Observers); it is safe for concurrent use.
//
// It keeps, per key, only the spans of an attempt it samples, from the
// start of the attempt until its status is written (and, while it is
// retried, the context of its last attempt): with a sampler that samples
// nothing it keeps nothing. With dependencies it also keeps, for a key
// Blocked, when it was blocked, until its next attempt starts or is
// declined (see MaxBlocked).
type Tracer struct {
	tracer  trace.Tracer
	links   *Links
	sample  func(reconciler.Attempt) bool
	recName attribute.KeyValue

	mu   sync.Mutex
	keys map[string]*keySpans
	sync trace.Span // the Sync running, if sampled
	live atomic.Int64

	blocks   map[string]*block // blocked.go
	nblocked atomic.Int64
}

// keySpans are the spans of one key's sampled attempt.
type keySpans struct {
	attempt    trace.Span        // open from the start until the operation returns
	sc         trace.SpanContext // the latest attempt's: its commit's parent, the next attempt's link
	finishedAt time.Time
	commit     trace.Span // open from the result to its status write (and a failure's fate)
}

// New returns a Tracer.
func New(opts Options) *Tracer {
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &Tracer{tracer: tp.Tracer(ScopeName), links: opts.Links, sample: opts.Sample,
		recName: AttrReconciler.String(opts.Reconciler), keys: map[string]*keySpans{},
		blocks: map[string]*block{}}
}

var (
	_ reconciler.Observer      = (*Tracer)(nil)
	_ reconciler.EventFilter   = (*Tracer)(nil)
	_ reconciler.AttemptFilter = (*Tracer)(nil)
)

// Observe implements reconciler.Observer.
func (t *Tracer) Observe(e reconciler.Event) {
	switch e.Kind {
	case reconciler.EventStarted:
		if e.Op == reconciler.OpSync {
			t.startSync(&e)
		} else {
			t.started(&e)
		}
	case reconciler.EventFinished:
		if e.Op == reconciler.OpSync {
			t.finishSync(&e)
		} else if t.live.Load() > 0 {
			t.finished(&e)
		}
	case reconciler.EventCommitted:
		if e.Status == reconciler.StatusKindDone && e.Commit != reconciler.CommitDropped && t.links != nil {
			t.links.done(e.Key, e.Revision)
		}
		if t.live.Load() > 0 {
			t.committed(&e)
		}
	case reconciler.EventFailed:
		if t.live.Load() > 0 {
			t.failed(&e)
		}
	case reconciler.EventBlocked:
		t.blocked(&e)
	case reconciler.EventReleased:
		t.released(&e)
	}
}

// Wants implements reconciler.EventFilter: the engine builds no read or
// ready events for a Tracer (a started event says when its request was
// queued); blocked and released come only with dependencies.
func (t *Tracer) Wants(k reconciler.EventKind) bool {
	switch k {
	case reconciler.EventStarted, reconciler.EventFinished, reconciler.EventCommitted, reconciler.EventFailed,
		reconciler.EventBlocked, reconciler.EventReleased:
		return true
	}
	return false
}

// started starts an attempt's span, from when its request was queued.
// An attempt the sampler drops costs the Start and nothing else: links
// are looked up, attributes set and the span kept only when it records.
func (t *Tracer) started(e *reconciler.Event) {
	start := e.QueuedAt
	if start.IsZero() || start.After(e.Time) {
		start = e.Time
	}
	blocked := t.takeBlocked(e.Key)
	_, span := t.tracer.Start(context.Background(), SpanAttempt, trace.WithTimestamp(blocked.spanStart(start)))
	if !span.IsRecording() {
		if t.live.Load() > 0 {
			t.mu.Lock()
			prev := t.take(e.Key) // an earlier attempt was sampled, this one is not
			t.mu.Unlock()
			if prev != nil {
				prev.end(e.Time)
			}
		}
		return
	}
	span.SetAttributes(t.recName, AttrKey.String(e.Key), AttrAttempt.Int(e.Attempt), AttrOp.String(string(e.Op)),
		AttrClass.String(e.Why.String()), AttrPriority.Int(e.Priority), AttrTarget.String(e.Target),
		AttrQueueWait.Float64(e.Time.Sub(start).Seconds()), AttrWorker.Int(e.Worker))
	if blocked != nil {
		blocked.record(span, e.Time)
	}
	span.AddEvent("started", trace.WithTimestamp(e.Time), trace.WithAttributes(AttrWorker.Int(e.Worker)))
	if t.links != nil {
		if sc, ok := t.links.lookup(e.Key, e.Revision); ok {
			span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{AttrLink.String("write")}})
		}
	}
	t.mu.Lock()
	prev := t.take(e.Key)
	t.keys[e.Key] = &keySpans{attempt: span, sc: span.SpanContext()}
	t.live.Store(int64(len(t.keys)))
	t.mu.Unlock()
	if prev != nil {
		prev.end(e.Time)
		span.AddLink(trace.Link{SpanContext: prev.sc, Attributes: []attribute.KeyValue{AttrLink.String("previous-attempt")}})
	}
}

// take removes key's spans, with t.mu held.
func (t *Tracer) take(key string) *keySpans {
	ks := t.keys[key]
	if ks != nil {
		delete(t.keys, key)
		t.live.Store(int64(len(t.keys)))
	}
	return ks
}

// end ends what is still open of ks at now (an attempt superseded).
func (ks *keySpans) end(now time.Time) {
	if ks.attempt != nil {
		ks.attempt.End(trace.WithTimestamp(now))
	}
	if ks.commit != nil {
		ks.commit.End(trace.WithTimestamp(now))
	}
}

// finished ends an attempt's span as its operation returned.
func (t *Tracer) finished(e *reconciler.Event) {
	t.mu.Lock()
	ks := t.keys[e.Key]
	if ks == nil || ks.attempt == nil {
		t.mu.Unlock()
		return
	}
	span := ks.attempt
	ks.attempt, ks.finishedAt = nil, e.Time
	t.mu.Unlock()
	span.SetAttributes(AttrResult.String(string(e.Result)), AttrDuration.Float64(e.Duration.Seconds()))
	span.AddEvent("finished", trace.WithTimestamp(e.Time))
	if e.Err != nil {
		span.SetStatus(codes.Error, e.Err.Error())
	}
	span.End(trace.WithTimestamp(e.Time))
}

// committed records an attempt's status write as its commit span: ended
// at once, or for a failure by failed. Spans end outside the lock: a
// span processor may be slow.
func (t *Tracer) committed(e *reconciler.Event) {
	t.mu.Lock()
	ks := t.keys[e.Key]
	if ks == nil {
		t.mu.Unlock()
		return
	}
	start := ks.finishedAt
	if start.IsZero() || start.After(e.Time) {
		start = e.Time
	}
	sc := ks.sc
	open := e.Status == reconciler.StatusKindError && e.Commit != reconciler.CommitDropped
	if !open && ks.attempt == nil {
		t.take(e.Key)
	}
	t.mu.Unlock()
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	_, span := t.tracer.Start(ctx, SpanCommit, trace.WithTimestamp(start))
	span.SetAttributes(t.recName, AttrKey.String(e.Key), AttrAttempt.Int(e.Attempt),
		AttrCommit.String(e.Commit.String()), AttrStatus.String(e.Status.String()))
	if !open {
		span.End(trace.WithTimestamp(e.Time))
		return
	}
	t.mu.Lock()
	if cur := t.keys[e.Key]; cur == ks {
		ks.commit = span // failed says when it is retried
		span = nil
	}
	t.mu.Unlock()
	if span != nil {
		span.End(trace.WithTimestamp(e.Time)) // superseded meanwhile
	}
}

// failed ends a failed attempt's commit span with when it is retried, or
// that it is given up on.
func (t *Tracer) failed(e *reconciler.Event) {
	t.mu.Lock()
	ks := t.keys[e.Key]
	if ks == nil || ks.commit == nil {
		t.mu.Unlock()
		return
	}
	span := ks.commit
	ks.commit = nil
	if e.Due.IsZero() && ks.attempt == nil {
		t.take(e.Key) // given up on: nothing follows until the object changes
	}
	t.mu.Unlock()
	if e.Due.IsZero() {
		span.SetAttributes(AttrGivenUp.Bool(true))
	} else {
		span.SetAttributes(AttrRetryAt.String(e.Due.UTC().Format(time.RFC3339Nano)))
	}
	if e.Err != nil {
		span.SetStatus(codes.Error, e.Err.Error())
	}
	span.End(trace.WithTimestamp(e.Time))
}

// startSync starts a whole Sync's span.
func (t *Tracer) startSync(e *reconciler.Event) {
	_, span := t.tracer.Start(context.Background(), SpanSync, trace.WithTimestamp(e.Time))
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(t.recName, AttrObjects.Int(e.Objects), AttrAttempt.Int(e.Attempt), AttrOp.String(string(e.Op)))
	t.mu.Lock()
	old := t.sync
	t.sync = span
	t.mu.Unlock()
	if old != nil {
		old.End(trace.WithTimestamp(e.Time))
	}
}

// finishSync ends a whole Sync's span.
func (t *Tracer) finishSync(e *reconciler.Event) {
	t.mu.Lock()
	span := t.sync
	t.sync = nil
	t.mu.Unlock()
	if span == nil {
		return
	}
	span.SetAttributes(AttrResult.String(string(e.Result)), AttrDuration.Float64(e.Duration.Seconds()))
	if e.Err != nil {
		span.SetStatus(codes.Error, e.Err.Error())
	}
	span.End(trace.WithTimestamp(e.Time))
}

// Held returns how many keys the Tracer holds spans or a retry's context
// for: the keys of sampled attempts not yet Done or given up on.
func (t *Tracer) Held() int { return int(t.live.Load()) }
