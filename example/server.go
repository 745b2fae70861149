package main

import (
	"errors"
	"expvar"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/converge-go/converge/reconciler"
)

// serverParams is what the HTTP server serves.
type serverParams struct {
	cell.In

	Lifecycle cell.Lifecycle
	Log       *slog.Logger
	Config    Config
	Desired   *desiredState

	// Registry (from reconciler.Cell) knows every reconciler, for /status.
	Registry *reconciler.Registry
	// Metrics is the registry metrics.Cell records converge's metrics in.
	Metrics *prometheus.Registry
	Health  *health
}

// server serves the file API and the operator endpoints on
// Config.HTTPAddr, from the hive's start to its stop.
type server struct {
	log  *slog.Logger
	addr string
	http *http.Server
	ln   net.Listener
	done chan struct{} // closed when Serve has returned
}

func newServer(p serverParams) (*server, error) {
	// The registry holds converge's metrics only; add the usual process
	// ones. It is this hive's own registry, so nothing else registers them.
	err := errors.Join(
		p.Metrics.Register(collectors.NewGoCollector()),
		p.Metrics.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})),
	)
	if err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	api := &fileAPI{desired: p.Desired}
	api.register(mux)
	mux.HandleFunc("GET /{$}", serveIndex)
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, p.Registry.Statuses())
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		serveHealth(w, p.Health)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(p.Metrics, promhttp.HandlerOpts{}))
	mux.Handle("GET /debug/vars", expvar.Handler())

	s := &server{
		log:  p.Log,
		addr: p.Config.HTTPAddr,
		http: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		done: make(chan struct{}),
	}
	p.Lifecycle.Append(cell.Hook{OnStart: s.start, OnStop: s.stop})
	return s, nil
}

// start listens before returning, so that a busy port fails the start
// with a clear error, and the address (with the port, when Config.HTTPAddr
// asked for port 0) is known once the hive has started.
func (s *server) start(cell.HookContext) error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("HTTP API: %w", err)
	}
	s.ln = ln
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		s.log.Warn("The HTTP API has no authentication and listens beyond loopback", "addr", ln.Addr())
	}
	s.log.Info("Serving the HTTP API", "url", "http://"+ln.Addr().String()+"/")
	go func() {
		defer close(s.done)
		if err := s.http.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("HTTP API stopped", "error", err)
		}
	}()
	return nil
}

// stop finishes the requests in flight, or gives up when ctx ends.
func (s *server) stop(ctx cell.HookContext) error {
	err := s.http.Shutdown(ctx)
	if err != nil {
		s.http.Close()
	}
	<-s.done
	return err
}

// Addr returns the address the server listens on, once started.
func (s *server) Addr() string { return s.ln.Addr().String() }

// serveHealth answers 200 when no job is degraded, else 503 with why.
func serveHealth(w http.ResponseWriter, h *health) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	degraded := h.Degraded()
	if len(degraded) == 0 {
		fmt.Fprintln(w, "ok")
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	for _, r := range degraded {
		fmt.Fprintln(w, r)
	}
}

// serveIndex lists the endpoints, for someone who curls the bare address.
func serveIndex(w http.ResponseWriter, r *http.Request) {
	fmt.Fprint(w, `converge example: keeps a directory in sync with a table of desired files

GET    /files           desired files and their reconciliation status
GET    /files/{name}    one desired file
PUT    /files/{name}    create or change one: {"content": "...", "mode": "0644"}
DELETE /files/{name}    stop desiring one (its file is removed)
GET    /status          what the reconciler is doing
GET    /healthz         200 when healthy, 503 and why when degraded
GET    /metrics         Prometheus metrics
GET    /debug/vars      expvar
`)
}
