package agentkit

import (
	"encoding/json"
	"errors"
	"expvar"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/cilium/hive/cell"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/converge-go/converge/health"
	"github.com/converge-go/converge/internal/hostcheck"
	"github.com/converge-go/converge/reconciler"
)

// Operator is what the operator endpoints serve.
type Operator struct {
	Health *health.Health
	// Metrics is the registry metrics.Cell records converge's metrics in.
	Metrics *prometheus.Registry
	// Registry (from reconciler.Cell) knows every reconciler, for /status.
	Registry *reconciler.Registry
}

// Register adds the operator endpoints to mux: /status (the reconcilers'
// status snapshots), /healthz (200, or 503 with every degraded job's
// report), /metrics (Prometheus, with the Go and process collectors
// added to the registry) and /debug/vars (expvar, without the command
// line). It fails if the registry already has the Go or process
// collector.
func (o Operator) Register(mux *http.ServeMux) error {
	// The registry is the hive's own, holding converge's metrics only;
	// add the usual process ones.
	err := errors.Join(
		o.Metrics.Register(collectors.NewGoCollector()),
		o.Metrics.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})),
	)
	if err != nil {
		return err
	}
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, o.Registry.Statuses())
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		serveHealth(w, o.Health)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Metrics, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /debug/vars", serveVars)
	return nil
}

// serveVars serves the expvar variables as expvar.Handler does, but for
// "cmdline": the API has no authentication, and a command line can hold
// what its user would not show (a password given as a flag).
func serveVars(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	fmt.Fprint(w, "{\n")
	first := true
	expvar.Do(func(kv expvar.KeyValue) {
		if kv.Key == "cmdline" {
			return
		}
		if !first {
			fmt.Fprint(w, ",\n")
		}
		first = false
		fmt.Fprintf(w, "%q: %s", kv.Key, kv.Value)
	})
	fmt.Fprint(w, "\n}\n")
}

// serveHealth answers 200 when no job is degraded, else 503 with why.
func serveHealth(w http.ResponseWriter, h *health.Health) {
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

// Bounds of every request to a Server: a client that sends slowly, reads
// slowly or holds an idle connection open is cut off, so that a few
// cannot take all of the agent's connections and memory.
const (
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout bounds reading a whole request, body included: the
	// largest body the examples take (a few MiB) is read in well under
	// a second on loopback.
	ReadTimeout = 30 * time.Second
	// WriteTimeout bounds a request from the end of its headers to the
	// end of the answer.
	WriteTimeout = time.Minute
	// IdleTimeout bounds how long a kept-alive connection waits for its
	// next request.
	IdleTimeout = time.Minute
)

// Server serves an HTTP handler on an address from the hive's start to
// its stop.
type Server struct {
	log  *slog.Logger
	addr string
	http *http.Server
	ln   net.Listener
	done chan struct{} // closed when Serve has returned
}

// NewServer returns a Server of handler on addr whose start and stop are
// hooks of lc. Every request is bounded in time (ReadTimeout and the
// others), and one whose Host is neither an IP address nor localhost is
// refused (see checkHost).
func NewServer(lc cell.Lifecycle, log *slog.Logger, addr string, handler http.Handler) *Server {
	s := &Server{
		log:  log,
		addr: addr,
		http: &http.Server{
			Handler:           checkHost(handler),
			ReadHeaderTimeout: ReadHeaderTimeout,
			ReadTimeout:       ReadTimeout,
			WriteTimeout:      WriteTimeout,
			IdleTimeout:       IdleTimeout,
		},
		done: make(chan struct{}),
	}
	lc.Append(cell.Hook{OnStart: s.start, OnStop: s.stop})
	return s
}

// start listens before returning, so that a busy port fails the start
// with a clear error, and the address (with the port, when addr asked for
// port 0) is known once the hive has started.
func (s *Server) start(cell.HookContext) error {
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
func (s *Server) stop(ctx cell.HookContext) error {
	err := s.http.Shutdown(ctx)
	if err != nil {
		s.http.Close()
	}
	<-s.done
	return err
}

// checkHost refuses a request whose Host header is a name other than
// localhost (hostcheck.Allowed): the API has no authentication, and a web
// page that gets its own name to resolve to 127.0.0.1 (DNS rebinding)
// would otherwise reach it from the user's browser as a same-origin site.
func checkHost(next http.Handler) http.Handler { return hostcheck.Handler(next) }

// Addr returns the address the server listens on, once started.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// WriteJSON writes v as indented JSON, for people reading curl's output.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v) // the status is out; a failed write has no one to tell
}

// WriteError writes err as {"error": "..."}.
func WriteError(w http.ResponseWriter, status int, err error) {
	WriteJSON(w, status, map[string]string{"error": err.Error()})
}

// ErrTooLarge is wrapped by DecodeJSON's error for a body over its limit.
var ErrTooLarge = errors.New("request body too large")

// DecodeJSON decodes a request body holding exactly one JSON object into
// v, refusing unknown fields (so that a typo is not silently ignored),
// bodies over maxBytes (wrapping ErrTooLarge), and anything after the
// object. example says what a body should look like, for the error of an
// empty one.
func DecodeJSON(w http.ResponseWriter, r *http.Request, maxBytes int64, v any, example string) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			return fmt.Errorf("%w: the request body is over %d bytes", ErrTooLarge, tooLarge.Limit)
		case errors.Is(err, io.EOF):
			err = fmt.Errorf("empty body, want %s", example)
		}
		return fmt.Errorf("bad JSON: %w", bounded(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("bad JSON: unexpected data after the object")
	}
	return nil
}

// maxDecodeError is how many bytes of a decoder's message DecodeJSON
// passes on.
const maxDecodeError = 200

// boundedError is a decoder's error with its message cut short; it
// unwraps to the error.
type boundedError struct {
	msg string
	err error
}

func (e boundedError) Error() string { return e.msg }
func (e boundedError) Unwrap() error { return e.err }

// bounded cuts err's message to maxDecodeError bytes on a character
// boundary: the decoder quotes an unknown field's name whole, with %q,
// and a name of bytes that are not UTF-8 comes back four times its size.
func bounded(err error) error {
	msg := err.Error()
	if len(msg) <= maxDecodeError {
		return err
	}
	cut := maxDecodeError
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return boundedError{msg: fmt.Sprintf("%s... (%d bytes)", msg[:cut], len(msg)), err: err}
}
