// Command example is a small files agent traced with OpenTelemetry: an
// HTTP API writes desired files into a statedb table, and converge's
// reconciler writes them into a directory. With --otlp-endpoint, every
// change's trace is exported over OTLP/HTTP: the API's request span (a
// caller's traceparent header continues the caller's trace), linked from
// each attempt's span, with its commit span under it; --trace-one-in N
// traces one attempt in N (and every attempt of a change whose request
// was traced). Without --otlp-endpoint nothing is exported, and the
// reconciler has no observer: tracing costs nothing.
//
// It lives in the otel module, not beside the files agent in the core
// module's example/: the core module's go.mod must not require
// OpenTelemetry, and a Go module cannot import a nested module's package
// without requiring it.
//
//	go run ./example --state-dir /tmp/files --otlp-endpoint localhost:4318
//	curl -X PUT --data hello -H 'traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' localhost:8080/files/greeting
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	convergeotel "github.com/converge-go/converge/otel"
	"github.com/converge-go/converge/reconciler"
)

func main() {
	stateDir := flag.String("state-dir", "", "directory the desired files are written to (required)")
	listen := flag.String("listen", "127.0.0.1:8080", "address of the HTTP API")
	endpoint := flag.String("otlp-endpoint", "", "host:port of an OTLP/HTTP trace receiver (plain HTTP); empty: no tracing")
	oneIn := flag.Int("trace-one-in", 1, "trace one attempt in this many (a change whose request was traced is traced whole)")
	flag.Parse()
	if *stateDir == "" {
		fmt.Fprintln(os.Stderr, "--state-dir is required")
		os.Exit(2)
	}
	if err := run(*stateDir, *listen, *endpoint, *oneIn); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run runs the agent until SIGINT or SIGTERM.
func run(stateDir, listen, endpoint string, oneIn int) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	a := &agent{dir: stateDir, tp: otel.GetTracerProvider(), links: convergeotel.NewLinks()} // the no-op provider: nothing is recorded
	if endpoint != "" {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(endpoint), otlptracehttp.WithInsecure())
		if err != nil {
			return fmt.Errorf("--otlp-endpoint: %w", err)
		}
		sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp)) // drops, never blocks, when the receiver lags
		defer func() { _ = sdk.Shutdown(context.Background()) }()
		opts := convergeotel.Options{TracerProvider: sdk, Links: a.links, Reconciler: "files"}
		if oneIn > 1 {
			opts.Sample = convergeotel.OneIn(oneIn)
		}
		a.tp, a.tracer = sdk, convergeotel.New(opts)
	}
	h := a.hive()
	if err := h.Start(log, ctx); err != nil {
		return err
	}
	srv := &http.Server{Addr: listen, Handler: a.handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	err := srv.ListenAndServe()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, h.Stop(log, context.Background()))
}

// agent is the files agent: its table, reconciler and tracing (tracer
// is nil when nothing is exported).
type agent struct {
	dir    string
	tp     trace.TracerProvider
	tracer *convergeotel.Tracer
	links  *convergeotel.Links
	db     *statedb.DB
	table  statedb.RWTable[*File]
	r      reconciler.Reconciler[*File]
}

// hive returns the agent's hive: the table and its reconciler, traced.
func (a *agent) hive() *hive.Hive {
	return hive.New(
		statedb.Cell,
		job.Cell,
		reconciler.Cell,
		cell.Provide(cell.NewSimpleHealth),
		cell.Module("files", "Desired files traced",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db *statedb.DB, p reconciler.Params) (err error) {
				a.db = db
				if a.table, err = statedb.NewTable(db, "desired-files", fileByName); err != nil {
					return err
				}
				a.r, err = reconciler.New(reconciler.Config[*File]{
					Table:           a.table,
					GetObjectStatus: func(f *File) reconciler.Status { return f.Status },
					SetObjectStatus: func(f *File, s reconciler.Status) *File { f.Status = s; return f },
					CloneObject:     (*File).clone,
					Operations:      &dirOps{dir: a.dir},
					Name:            "files",
					Observers:       a.observers(),
				}, p)
				return err
			}),
		),
	)
}

// observers are the reconciler's: the tracer, when there is one.
func (a *agent) observers() []reconciler.Observer {
	if a.tracer == nil {
		return nil
	}
	return []reconciler.Observer{a.tracer}
}

// handler is the HTTP API: PUT /files/{name} writes a desired file in the
// request's trace (a caller's traceparent header continues its trace).
func (a *agent) handler() http.Handler {
	prop := propagation.TraceContext{}
	tracer := a.tp.Tracer("files-api")
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /files/{name}", func(w http.ResponseWriter, req *http.Request) {
		ctx := prop.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
		ctx, span := tracer.Start(ctx, "PUT /files/{name}", trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		if err != nil || !validName(req.PathValue("name")) {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		wtxn := a.db.WriteTxn(a.table)
		f := &File{Name: req.PathValue("name"), Content: string(body), Status: reconciler.StatusPending()}
		if _, _, err := convergeotel.Insert(ctx, a.links, wtxn, a.table, f); err != nil {
			wtxn.Abort()
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		wtxn.Commit()
		w.WriteHeader(http.StatusAccepted)
	})
	return mux
}
