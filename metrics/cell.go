package metrics

import (
	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-go/converge/reconciler"
)

// Cell gives every reconciler of the hive Prometheus metrics, on a
// registry of its own that nothing global sees. It provides:
//
//   - reconciler.Metrics (the interface, which is what fills
//     reconciler.Params.DefaultMetrics),
//   - the *prometheus.Registry holding the metrics, for the application to
//     serve with promhttp.HandlerFor,
//   - the script command reconciler/metrics.
//
// Use NewCell for options: another registry, or expvar instead.
var Cell = NewCell()

// ExpVarCell is Cell with expvar instead of Prometheus: reconcilers publish
// under ExpVarName (NewExpVar), and no *prometheus.Registry is provided.
var ExpVarCell = NewCell(WithExpVar())

// Option changes what NewCell builds.
type Option func(*cellOptions)

type cellOptions struct {
	expvar     bool
	registry   *prometheus.Registry
	defaultReg bool
}

// WithRegistry registers the metrics in reg, and provides reg, instead of
// a new registry (WithRegistry(nil) keeps the new one).
func WithRegistry(reg *prometheus.Registry) Option {
	return func(o *cellOptions) { o.registry, o.defaultReg = reg, false }
}

// WithDefaultRegistry registers the metrics in prometheus.DefaultRegisterer,
// the global registry that promhttp.Handler serves, and provides it. The
// cell fails to construct with ErrNotRegistry if DefaultRegisterer has been
// replaced by something that is not a *prometheus.Registry.
func WithDefaultRegistry() Option {
	return func(o *cellOptions) { o.registry, o.defaultReg = nil, true }
}

// WithExpVar selects expvar (NewExpVar) instead of Prometheus; registry
// options are then ignored.
func WithExpVar() Option {
	return func(o *cellOptions) { o.expvar = true }
}

// NewCell returns a cell like Cell, changed by opts. Include one per hive.
func NewCell(opts ...Option) cell.Cell {
	var o cellOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.expvar {
		return cell.Module("converge-metrics", "Reconciler metrics in expvar",
			cell.ProvidePrivate(NewExpVar),
			cell.Provide(
				func(e *ExpVar) reconciler.Metrics { return e },
				func(e *ExpVar) hive.ScriptCmdOut {
					return hive.NewScriptCmd(ScriptCmdName, expvarScriptCmd(e))
				},
			),
		)
	}
	return cell.Module("converge-metrics", "Reconciler metrics in Prometheus",
		cell.ProvidePrivate(func() (*promCell, error) { return newPromCell(o) }),
		cell.Provide(
			func(c *promCell) *prometheus.Registry { return c.registry },
			func(c *promCell) reconciler.Metrics { return c.metrics },
			func(c *promCell) hive.ScriptCmdOut {
				return hive.NewScriptCmd(ScriptCmdName, prometheusScriptCmd(c.registry))
			},
		),
	)
}

// promCell is what the Prometheus cell builds once and hands out in parts.
type promCell struct {
	registry *prometheus.Registry
	metrics  *Prometheus
}

func newPromCell(o cellOptions) (*promCell, error) {
	reg := o.registry
	if o.defaultReg {
		r, ok := prometheus.DefaultRegisterer.(*prometheus.Registry)
		if !ok {
			return nil, ErrNotRegistry
		}
		reg = r
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := NewPrometheus(reg)
	if err != nil {
		return nil, err
	}
	return &promCell{registry: reg, metrics: m}, nil
}
