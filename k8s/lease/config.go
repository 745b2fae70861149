package lease

import (
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// Defaults of Config's durations: client-go's leader election examples'
// and controller-runtime's.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// ErrInvalidConfig is wrapped by New's errors, which name the field.
var ErrInvalidConfig = errors.New("invalid lease config")

// Config configures an Elector.
type Config struct {
	// Client reaches the Leases: clientset.CoordinationV1(). It needs
	// get, create and update on leases.coordination.k8s.io in Namespace.
	// Required.
	Client coordinationv1.LeasesGetter

	// Namespace and Name of the Lease, the same for every replica of one
	// group of reconcilers. Required.
	Namespace, Name string

	// Identity names this replica, unique in the group (the pod's name).
	// It is the Lease's holderIdentity while this replica leads.
	// Required.
	Identity string

	// LeaseDuration is how long the other replicas wait, after they last
	// saw the Lease renewed, before they take it: a crashed leader is
	// replaced within about LeaseDuration + RetryPeriod. Default
	// DefaultLeaseDuration.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader goes on after it sent its last
	// successful renewal: it must be less than LeaseDuration, by enough
	// for operations to notice their cancelled context. Default
	// DefaultRenewDeadline.
	RenewDeadline time.Duration
	// RetryPeriod is the interval between attempts to take or renew the
	// Lease. Default DefaultRetryPeriod.
	RetryPeriod time.Duration

	// StopTimeout bounds, at a clean stop, the wait for operations in
	// flight before the Lease is given up. Default RenewDeadline.
	StopTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = DefaultRenewDeadline
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = DefaultRetryPeriod
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = c.RenewDeadline
	}
	return c
}

func (c Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Client == nil:
		return bad("Client is required")
	case c.Namespace == "" || c.Name == "":
		return bad("Namespace and Name are required")
	case c.Identity == "":
		return bad("Identity is required")
	case c.RetryPeriod <= 0:
		return bad("RetryPeriod %s must be positive", c.RetryPeriod)
	case c.RenewDeadline <= c.RetryPeriod*6/5:
		// client-go's rule: a renewal is tried at least once, with jitter.
		return bad("RenewDeadline %s must be more than 1.2 RetryPeriod (%s)", c.RenewDeadline, c.RetryPeriod)
	case c.LeaseDuration <= c.RenewDeadline:
		return bad("LeaseDuration %s must be more than RenewDeadline %s", c.LeaseDuration, c.RenewDeadline)
	case c.StopTimeout < 0:
		return bad("StopTimeout %s is negative", c.StopTimeout)
	}
	return nil
}
