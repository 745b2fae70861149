package lease

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// Defaults of ShardConfig that Config does not have.
const (
	// DefaultSlots is the number of slots the keys are split into: enough
	// for a busiest replica within about 1.3x its fair share up to 4
	// replicas, and few Leases (one per slot) to list.
	DefaultSlots = 64
	// DefaultDrainTimeout bounds the wait, at a handover, for operations
	// in flight on a slot before they are cancelled and the slot released.
	DefaultDrainTimeout = 5 * time.Second
)

// MaxSlots is the largest ShardConfig.Slots: every replica lists every
// slot's Lease each RetryPeriod.
const MaxSlots = 1024

// ShardConfig configures a Sharder. Every replica of one group must have
// the same Namespace, Name and Slots.
type ShardConfig struct {
	// Client reaches the Leases: clientset.CoordinationV1(). It needs get,
	// list, create, update and delete on leases.coordination.k8s.io in
	// Namespace. Required.
	Client coordinationv1.LeasesGetter

	// Namespace of the group's Leases, and Name of the group: the Leases
	// are Name-m-<Identity>, one per replica (membership), and Name-s-<n>,
	// one per slot (the claims), labelled with the group. Required; Name
	// must be a valid label value.
	Namespace, Name string

	// Identity names this replica, unique in the group: at most one
	// running process may have it (the pod's name). A process restarted
	// with the same Identity claims the slots whose Leases still name it
	// at once. Required.
	Identity string

	// Slots is how many slots the keys are split into (slots.Of, the
	// same hash as the etcd module's shard.SlotOf). It bounds the number
	// of useful replicas and sets the balance. Default DefaultSlots, at
	// most MaxSlots.
	Slots int

	// LeaseDuration is how long the other replicas wait, after they last
	// saw this replica's membership Lease change, before they take its
	// slots: a replica that dies or is cut off is replaced within about
	// LeaseDuration + RetryPeriod. Default DefaultLeaseDuration.
	LeaseDuration time.Duration
	// RenewDeadline is how long this replica goes on owning its slots
	// after it sent its last successful renewal. It must be less than
	// LeaseDuration; the difference must cover the time operations take
	// to notice their cancelled context, and a renewal that takes longer
	// than the difference to return does not count. Default
	// DefaultRenewDeadline.
	RenewDeadline time.Duration
	// RetryPeriod is the interval between renewals of the membership
	// Lease and between looks at the group. Default DefaultRetryPeriod.
	RetryPeriod time.Duration

	// DrainTimeout bounds, when a slot moves to another replica and at a
	// clean stop, the wait for its operations in flight; then they are
	// cancelled and the slot released. Default DefaultDrainTimeout.
	DrainTimeout time.Duration
}

func (c ShardConfig) withDefaults() ShardConfig {
	if c.Slots == 0 {
		c.Slots = DefaultSlots
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = DefaultRenewDeadline
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = DefaultRetryPeriod
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	return c
}

func (c ShardConfig) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Client == nil:
		return bad("ShardConfig.Client is required")
	case c.Namespace == "" || c.Name == "":
		return bad("ShardConfig.Namespace and ShardConfig.Name are required")
	case len(validation.IsValidLabelValue(c.Name)) > 0:
		return bad("ShardConfig.Name %q is not a valid label value", c.Name)
	case c.Identity == "":
		return bad("ShardConfig.Identity is required")
	case c.Slots < 1 || c.Slots > MaxSlots:
		return bad("ShardConfig.Slots %d is not within 1 and %d", c.Slots, MaxSlots)
	case c.RetryPeriod <= 0:
		return bad("ShardConfig.RetryPeriod %s must be positive", c.RetryPeriod)
	case c.RenewDeadline <= c.RetryPeriod:
		return bad("ShardConfig.RenewDeadline %s must be more than RetryPeriod %s", c.RenewDeadline, c.RetryPeriod)
	case c.LeaseDuration <= c.RenewDeadline:
		return bad("ShardConfig.LeaseDuration %s must be more than RenewDeadline %s", c.LeaseDuration, c.RenewDeadline)
	case c.DrainTimeout < 0:
		return bad("ShardConfig.DrainTimeout %s is negative", c.DrainTimeout)
	}
	return nil
}
