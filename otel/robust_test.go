package convergeotel_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	convergeotel "github.com/converge-go/converge/otel"
	"github.com/converge-go/converge/reconciler"
)

// stuckExporter blocks every export until released.
type stuckExporter struct {
	release chan struct{}
	once    sync.Once
}

func (e *stuckExporter) ExportSpans(ctx context.Context, _ []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.release:
	case <-ctx.Done():
	}
	return nil
}

func (e *stuckExporter) Shutdown(context.Context) error {
	e.once.Do(func() { close(e.release) })
	return nil
}

// keys returns n keys.
func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("k%04d", i)
	}
	return out
}

// TestStuckExporterDoesNotStall: with an exporter that never returns
// behind the SDK's batch processor (a small queue, which drops when
// full), every object is still reconciled: the Tracer never waits for
// the exporter.
func TestStuckExporterDoesNotStall(t *testing.T) {
	exp := &stuckExporter{release: make(chan struct{})}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(8), sdktrace.WithMaxExportBatchSize(4)),
		sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer func() {
		exp.Shutdown(context.Background()) // unblock the export in flight, then let the processor go
		_ = tp.Shutdown(context.Background())
	}()
	f := start(t, false, convergeotel.New(convergeotel.Options{TracerProvider: tp}))
	f.write(context.Background(), nil, keys(500)...)
	f.settle()
}

// panickingProcessor panics when a span ends.
type panickingProcessor struct{ sdktrace.SpanProcessor }

func (panickingProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (panickingProcessor) OnEnd(sdktrace.ReadOnlySpan)                     { panic("exporter bug") }
func (panickingProcessor) Shutdown(context.Context) error                  { return nil }
func (panickingProcessor) ForceFlush(context.Context) error                { return nil }

// TestPanickingTracerDoesNotCrash: a Tracer whose span processor panics
// on every span crashes nothing: every object is reconciled, and an
// observer beside it (a Subscription) gets every success.
func TestPanickingTracerDoesNotCrash(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(panickingProcessor{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	sub := reconciler.NewSubscription(1000)
	f := start(t, false, convergeotel.New(convergeotel.Options{TracerProvider: tp}), sub)
	f.target.fails["k0003"] = 1
	f.write(context.Background(), nil, keys(50)...)
	f.settle()
	succeeded := 0
	for len(sub.Outcomes()) > 0 {
		if o := <-sub.Outcomes(); o.Kind == reconciler.OutcomeSucceeded {
			succeeded++
		}
	}
	if succeeded != 50 {
		t.Errorf("%d successes delivered beside a panicking tracer, want 50", succeeded)
	}
}

// TestNeverSampledKeepsNothing: with a sampler that samples nothing, no
// span is exported and the Tracer holds nothing for any key, failing
// ones included.
func TestNeverSampledKeepsNothing(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	never := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.NeverSample()))
	defer func() { _ = never.Shutdown(context.Background()) }()
	tr := convergeotel.New(convergeotel.Options{TracerProvider: never, Links: convergeotel.NewLinks()})
	f := start(t, false, tr)
	f.target.fails["k0001"] = 2
	f.write(context.Background(), nil, keys(20)...)
	f.settle()
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans exported by a sampler that samples nothing", n)
	}
	if n := tr.Held(); n != 0 {
		t.Errorf("the Tracer holds %d keys", n)
	}
}
