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
	Desired   *desiredRules
	Target    *target

	// Registry (from reconciler.Cell) knows every reconciler, for /status.
	Registry *reconciler.Registry
	// Metrics is the registry metrics.Cell records converge's metrics in.
	Metrics *prometheus.Registry
	Health  *health.Health
}

// newServer serves the rule API and the operator endpoints (see
// agentkit.Operator) on Config.HTTPAddr, from the hive's start to its stop.
func newServer(p serverParams) (*agentkit.Server, error) {
	mux := http.NewServeMux()
	api := &ruleAPI{desired: p.Desired, nft: p.Target.nft}
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
	fmt.Fprint(w, `converge example/firewall: keeps an nftables table in sync with a table of allowed ports

GET    /rules           desired rules and their reconciliation status
GET    /rules/{name}    one desired rule
PUT    /rules/{name}    create or change one: {"protocol": "tcp", "port": 22, "comment": "ssh"}
                        (a range: "port": 8000, "end_port": 8099)
DELETE /rules/{name}    stop desiring one
GET    /ruleset         the table as nft lists it
GET    /status          what the reconciler is doing
GET    /healthz         200 when healthy, 503 and why when degraded
GET    /metrics         Prometheus metrics
GET    /debug/vars      expvar
`)
}
