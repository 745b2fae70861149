package main

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/cilium/hive/cell"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-go/converge/example/internal/agentkit"
	"github.com/converge-go/converge/health"
	"github.com/converge-go/converge/reconciler"
)

// serverParams is what the HTTP server serves.
type serverParams struct {
	cell.In

	Lifecycle cell.Lifecycle
	Log       *slog.Logger
	Config    Config
	Desired   *desiredState
	// Reconciler answers /explain.
	Reconciler reconciler.Reconciler[*File]

	// Registry (from reconciler.Cell) knows every reconciler, for /status.
	Registry *reconciler.Registry
	// Metrics is the registry metrics.Cell records converge's metrics in.
	Metrics *prometheus.Registry
	Health  *health.Health
}

// newServer serves the file API and the operator endpoints (see
// agentkit.Operator) on Config.HTTPAddr, from the hive's start to its stop.
func newServer(p serverParams) (*agentkit.Server, error) {
	mux := http.NewServeMux()
	api := &fileAPI{desired: p.Desired, rec: p.Reconciler}
	api.register(mux)
	mux.HandleFunc("GET /{$}", serveIndex)
	op := agentkit.Operator{Health: p.Health, Metrics: p.Metrics, Registry: p.Registry}
	if err := op.Register(mux); err != nil {
		return nil, err
	}
	return agentkit.NewServer(p.Lifecycle, p.Log, p.Config.HTTPAddr, mux), nil
}

// serveIndex lists the endpoints, for someone who curls the bare address.
func serveIndex(w http.ResponseWriter, r *http.Request) {
	fmt.Fprint(w, `converge example: keeps a directory in sync with a table of desired files

GET    /files           desired files and their reconciliation status
GET    /files/{name}    one desired file
PUT    /files/{name}    create or change one: {"content": "...", "mode": "0644"}
DELETE /files/{name}    stop desiring one (its file is removed)
GET    /explain/{name}  why one is not Done (?json for JSON)
GET    /status          what the reconciler is doing
GET    /healthz         200 when healthy, 503 and why when degraded
GET    /metrics         Prometheus metrics
GET    /debug/vars      expvar
`)
}
