package convergeotel_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/cilium/statedb"
	"go.opentelemetry.io/otel/trace"

	convergeotel "github.com/converge-go/converge/otel"
	"github.com/converge-go/converge/reconciler"
)

// TestHeadSampler: with Options.Sample, an attempt it declines yields no
// span (whatever the TracerProvider's sampler) and the Tracer keeps
// nothing of it; it is asked once per attempt, but not for the retries
// of an attempt it took (those are traced, with their attempt numbers),
// nor for a change written through Links in a sampled trace, whose
// attempt is traced and linked.
func TestHeadSampler(t *testing.T) {
	tp, exp := traced(t)
	links := convergeotel.NewLinks()
	var mu sync.Mutex
	asked := map[string][]int{}
	tr := convergeotel.New(convergeotel.Options{TracerProvider: tp, Links: links, Sample: func(a reconciler.Attempt) bool {
		mu.Lock()
		defer mu.Unlock()
		asked[a.Key] = append(asked[a.Key], a.Attempt)
		return a.Key == "x"
	}})
	f := start(t, false, tr)
	f.target.fails["x"], f.target.fails["y"] = 2, 2
	ctx, writer := tp.Tracer("writer").Start(context.Background(), "PUT /items/w")
	f.write(ctx, func(ctx context.Context, wtxn statedb.WriteTxn, o *item) error {
		_, _, err := convergeotel.Insert(ctx, links, wtxn, f.table, o)
		return err
	}, "w")
	writer.End()
	f.write(context.Background(), nil, "x", "y", "z")
	f.settle()

	var got []int64
	for _, s := range spans(exp, convergeotel.SpanAttempt, "x") {
		got = append(got, attr(s, convergeotel.AttrAttempt).AsInt64())
	}
	if !slices.Equal(got, []int64{1, 2, 3}) {
		t.Errorf("x, sampled, and its retries: attempt spans %v, want [1 2 3]", got)
	}
	if w := spans(exp, convergeotel.SpanAttempt, "w"); len(w) != 1 || !linksTo(w[0], writer.SpanContext(), "write") {
		t.Errorf("w, written in a sampled trace: %+v", w)
	}
	for _, key := range []string{"y", "z"} {
		if n := len(spans(exp, convergeotel.SpanAttempt, key)) + len(spans(exp, convergeotel.SpanCommit, key)); n != 0 {
			t.Errorf("%s, declined: %d spans", key, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string][]int{"x": {1}, "y": {1, 2, 3}, "z": {1}}
	for key, w := range want {
		if !slices.Equal(asked[key], w) {
			t.Errorf("the sampler was asked of %s for attempts %v, want %v", key, asked[key], w)
		}
	}
	if len(asked) != len(want) {
		t.Errorf("the sampler was asked of %v", asked)
	}
	if n, l := tr.Held(), links.Len(); n != 0 || l != 0 {
		t.Errorf("after everything is Done the Tracer holds %d keys, Links %d writes", n, l)
	}
}

// TestOneIn: OneIn(n) takes one attempt in n, the first included; 1 and
// less take every one.
func TestOneIn(t *testing.T) {
	for _, c := range []struct{ n, calls, want int }{{3, 9, 3}, {3, 1, 1}, {1, 5, 5}, {0, 5, 5}, {1000, 999, 1}} {
		s, took := convergeotel.OneIn(c.n), 0
		for range c.calls {
			if s(reconciler.Attempt{}) {
				took++
			}
		}
		if took != c.want {
			t.Errorf("OneIn(%d) took %d of %d, want %d", c.n, took, c.calls, c.want)
		}
	}
}

// TestLinksRecordOnlySampled: a write in a trace that is not sampled is
// not remembered (its attempts would link to a trace nobody records, and
// the head sampler would have to take them).
func TestLinksRecordOnlySampled(t *testing.T) {
	links := convergeotel.NewLinks()
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}})
	links.Record(trace.ContextWithSpanContext(context.Background(), sc), []byte("a"), 1)
	if n := links.Len(); n != 0 {
		t.Errorf("an unsampled write remembered: %d", n)
	}
	links.Record(trace.ContextWithSpanContext(context.Background(), sc.WithTraceFlags(trace.FlagsSampled)), []byte("a"), 1)
	if n := links.Len(); n != 1 {
		t.Errorf("a sampled write not remembered: %d", n)
	}
}
