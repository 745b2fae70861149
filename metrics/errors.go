package metrics

import "errors"

var (
	// ErrNoRegisterer is returned by NewPrometheus when it is given a nil
	// prometheus.Registerer.
	ErrNoRegisterer = errors.New("metrics: nil prometheus.Registerer")

	// ErrNotRegistry is returned by the cell built with
	// WithDefaultRegistry when prometheus.DefaultRegisterer has been
	// replaced by something other than a *prometheus.Registry, which the
	// cell could not provide.
	ErrNotRegistry = errors.New("metrics: prometheus.DefaultRegisterer is not a *prometheus.Registry")
)
