package convergeotel_test

import (
	"context"
	"slices"
	"testing"

	"github.com/cilium/statedb"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	convergeotel "github.com/converge-go/converge/otel"
)

// traced returns a tracer provider that samples everything into an
// in-memory exporter, synchronously, and shuts down when the test ends.
func traced(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// spans returns the exported spans named name whose converge.key is key
// ("" for any), in the order they ended.
func spans(exp *tracetest.InMemoryExporter, name, key string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range exp.GetSpans() {
		if s.Name == name && (key == "" || attr(s, convergeotel.AttrKey).AsString() == key) {
			out = append(out, s)
		}
	}
	return out
}

// attr returns s's attribute k (the zero Value when absent).
func attr(s tracetest.SpanStub, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// TestOneSpanPerAttempt: each object reconciled at once yields one
// attempt span, with its key, attempt, class, worker and result, and a
// commit span under it that says its Done was written.
func TestOneSpanPerAttempt(t *testing.T) {
	tp, exp := traced(t)
	f := start(t, false, convergeotel.New(convergeotel.Options{TracerProvider: tp, Reconciler: "items"}))
	f.write(context.Background(), nil, "a", "b", "c")
	f.settle()
	for _, key := range []string{"a", "b", "c"} {
		attempts := spans(exp, convergeotel.SpanAttempt, key)
		if len(attempts) != 1 {
			t.Fatalf("%s: %d attempt spans, want 1", key, len(attempts))
		}
		s := attempts[0]
		for k, want := range map[attribute.Key]any{
			convergeotel.AttrReconciler: "items", convergeotel.AttrAttempt: int64(1), convergeotel.AttrClass: "change",
			convergeotel.AttrResult: "ok", convergeotel.AttrOp: "update",
		} {
			if got := attr(s, k).AsInterface(); got != want {
				t.Errorf("%s: %s = %v, want %v", key, k, got, want)
			}
		}
		if attr(s, convergeotel.AttrWorker).AsInt64() < 1 || attr(s, convergeotel.AttrQueueWait).AsFloat64() < 0 {
			t.Errorf("%s: worker %v, queue wait %v", key, attr(s, convergeotel.AttrWorker), attr(s, convergeotel.AttrQueueWait))
		}
		if !slices.ContainsFunc(s.Events, func(e sdktrace.Event) bool { return e.Name == "started" }) {
			t.Errorf("%s: no started event in %v", key, s.Events)
		}
		commits := spans(exp, convergeotel.SpanCommit, key)
		if len(commits) != 1 || commits[0].Parent.SpanID() != s.SpanContext.SpanID() ||
			attr(commits[0], convergeotel.AttrCommit).AsString() != "written" || attr(commits[0], convergeotel.AttrStatus).AsString() != "Done" {
			t.Errorf("%s: commit spans %+v", key, commits)
		}
	}
}

// TestFailThenSucceedYieldsTwoAttempts: a key that fails once yields two
// attempt spans, numbered 1 and 2, with the results error then ok; the
// first's status is the error and its commit span says when the retry
// is due; the second links to the first.
func TestFailThenSucceedYieldsTwoAttempts(t *testing.T) {
	tp, exp := traced(t)
	f := start(t, false, convergeotel.New(convergeotel.Options{TracerProvider: tp}))
	f.target.fails["a"] = 1
	f.write(context.Background(), nil, "a")
	f.settle()
	attempts := spans(exp, convergeotel.SpanAttempt, "a")
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans, want 2", len(attempts))
	}
	first, second := attempts[0], attempts[1]
	if attr(first, convergeotel.AttrAttempt).AsInt64() != 1 || attr(first, convergeotel.AttrResult).AsString() != "error" ||
		first.Status.Code != codes.Error {
		t.Errorf("first attempt: %v, %v", first.Attributes, first.Status)
	}
	if attr(second, convergeotel.AttrAttempt).AsInt64() != 2 || attr(second, convergeotel.AttrResult).AsString() != "ok" ||
		attr(second, convergeotel.AttrClass).AsString() != "retry" || second.Status.Code == codes.Error {
		t.Errorf("second attempt: %v, %v", second.Attributes, second.Status)
	}
	if !linksTo(second, first.SpanContext, "previous-attempt") {
		t.Errorf("the retry does not link to the first attempt: %v", second.Links)
	}
	commits := spans(exp, convergeotel.SpanCommit, "a")
	if len(commits) != 2 || attr(commits[0], convergeotel.AttrStatus).AsString() != "Error" ||
		attr(commits[0], convergeotel.AttrRetryAt).AsString() == "" || attr(commits[1], convergeotel.AttrStatus).AsString() != "Done" {
		t.Errorf("commit spans: %+v", commits)
	}
}

// TestRetrySpansCarryAttemptNumbers: a key that fails three times yields
// four attempt spans numbered 1 to 4, each retry a "retry".
func TestRetrySpansCarryAttemptNumbers(t *testing.T) {
	tp, exp := traced(t)
	f := start(t, false, convergeotel.New(convergeotel.Options{TracerProvider: tp}))
	f.target.fails["a"] = 3
	f.write(context.Background(), nil, "a")
	f.settle()
	var got []int64
	for _, s := range spans(exp, convergeotel.SpanAttempt, "a") {
		got = append(got, attr(s, convergeotel.AttrAttempt).AsInt64())
		if n := attr(s, convergeotel.AttrAttempt).AsInt64(); (n > 1) != (attr(s, convergeotel.AttrClass).AsString() == "retry") {
			t.Errorf("attempt %d is a %q", n, attr(s, convergeotel.AttrClass).AsString())
		}
	}
	if want := []int64{1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Errorf("attempt numbers %v, want %v", got, want)
	}
}

// TestTracedWriteLinks: a change written through Links in a traced
// context links its attempt to the writer's span; one written without a
// trace links to nothing, and Links forgets a change once it is Done.
func TestTracedWriteLinks(t *testing.T) {
	tp, exp := traced(t)
	links := convergeotel.NewLinks()
	f := start(t, false, convergeotel.New(convergeotel.Options{TracerProvider: tp, Links: links}))
	ctx, writer := tp.Tracer("writer").Start(context.Background(), "PUT /items/a")
	insert := func(ctx context.Context, wtxn statedb.WriteTxn, o *item) error {
		_, _, err := convergeotel.Insert(ctx, links, wtxn, f.table, o)
		return err
	}
	f.write(ctx, insert, "a")
	writer.End()
	f.write(context.Background(), insert, "b")
	f.settle()
	a := spans(exp, convergeotel.SpanAttempt, "a")
	if len(a) != 1 || !linksTo(a[0], writer.SpanContext(), "write") {
		t.Fatalf("a's attempt does not link to the write: %+v", a)
	}
	if b := spans(exp, convergeotel.SpanAttempt, "b"); len(b) != 1 || len(b[0].Links) != 0 {
		t.Errorf("b, written without a trace, links: %+v", b)
	}
	if n := links.Len(); n != 0 {
		t.Errorf("Links remembers %d writes after their changes are Done", n)
	}
}

// linksTo reports whether s links to sc, as kind.
func linksTo(s tracetest.SpanStub, sc trace.SpanContext, kind string) bool {
	return slices.ContainsFunc(s.Links, func(l sdktrace.Link) bool {
		return l.SpanContext.Equal(sc) && slices.Contains(l.Attributes, convergeotel.AttrLink.String(kind))
	})
}

// TestSyncSpan: a whole-set Sync yields one span per Sync, with the
// number of objects it was given.
func TestSyncSpan(t *testing.T) {
	tp, exp := traced(t)
	f := start(t, true, convergeotel.New(convergeotel.Options{TracerProvider: tp}))
	f.write(context.Background(), nil, "a", "b", "c", "d", "e")
	f.settle()
	f.target.mu.Lock()
	syncs := f.target.syncs
	f.target.mu.Unlock()
	got := spans(exp, convergeotel.SpanSync, "")
	if len(got) != syncs || syncs == 0 {
		t.Fatalf("%d sync spans for %d Syncs", len(got), syncs)
	}
	if last := got[len(got)-1]; attr(last, convergeotel.AttrObjects).AsInt64() != 5 || attr(last, convergeotel.AttrResult).AsString() != "ok" {
		t.Errorf("the last Sync's span: %v", last.Attributes)
	}
}
