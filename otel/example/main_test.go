package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	convergeotel "github.com/converge-go/converge/otel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTraceFromRequestToDone: a PUT carrying a caller's traceparent is
// written in the caller's trace, and the attempt that wrote the file
// links to the API's span, with its commit span under it.
func TestTraceFromRequestToDone(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	links := convergeotel.NewLinks()
	a := &agent{dir: t.TempDir(), tp: tp, links: links,
		tracer: convergeotel.New(convergeotel.Options{TracerProvider: tp, Links: links, Reconciler: "files"})}
	h := a.hive()
	log := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Start(log, ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := h.Stop(log, context.Background()); err != nil {
			t.Error(err)
		}
	}()
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req := httptest.NewRequest(http.MethodPut, "/files/greeting", strings.NewReader("hello"))
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	rec := httptest.NewRecorder()
	a.handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("PUT: %d %s", rec.Code, rec.Body)
	}
	if err := a.r.WaitUntilSettled(ctx, a.table.Revision(a.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(a.dir, "greeting")); err != nil || string(got) != "hello" {
		t.Fatalf("the file: %q, %v", got, err)
	}
	byName := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		byName[s.Name] = s
	}
	api, attempt, commit := byName["PUT /files/{name}"], byName[convergeotel.SpanAttempt], byName[convergeotel.SpanCommit]
	if api.SpanContext.TraceID().String() != traceID {
		t.Errorf("the API's span is not in the caller's trace: %s", api.SpanContext.TraceID())
	}
	if len(attempt.Links) != 1 || !attempt.Links[0].SpanContext.Equal(api.SpanContext) {
		t.Errorf("the attempt links to %v, want the API's span %v", attempt.Links, api.SpanContext)
	}
	if commit.Parent.SpanID() != attempt.SpanContext.SpanID() {
		t.Errorf("the commit span's parent is %s, want the attempt %s", commit.Parent.SpanID(), attempt.SpanContext.SpanID())
	}
	t.Log("\n" + render(exp.GetSpans()))
}

// render prints spans as docs/observing.md shows them: name, start and
// length relative to the first, and the attributes.
func render(spans tracetest.SpanStubs) string {
	var b strings.Builder
	t0 := spans[0].StartTime
	for _, s := range spans {
		if s.StartTime.Before(t0) {
			t0 = s.StartTime
		}
	}
	for _, s := range spans {
		fmt.Fprintf(&b, "%-18s trace %s… span %s parent %s +%v %v\n", s.Name, s.SpanContext.TraceID().String()[:8],
			s.SpanContext.SpanID(), s.Parent.SpanID(), s.StartTime.Sub(t0).Round(time.Microsecond), s.EndTime.Sub(s.StartTime).Round(time.Microsecond))
		for _, kv := range s.Attributes {
			fmt.Fprintf(&b, "    %s=%s\n", kv.Key, kv.Value.String())
		}
		for _, e := range s.Events {
			fmt.Fprintf(&b, "    event %s +%v\n", e.Name, e.Time.Sub(t0).Round(time.Microsecond))
		}
		for _, l := range s.Links {
			fmt.Fprintf(&b, "    link span %s\n", l.SpanContext.SpanID())
		}
	}
	return b.String()
}
