package k8ssource

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
)

// Defaults of StatusConfig.
const (
	// DefaultFieldManager is the server-side apply field manager of the
	// status writer.
	DefaultFieldManager = "converge"
	// DefaultMinInterval and DefaultBurst limit the writes of one object
	// (a token bucket per object): DefaultBurst writes at once, then one
	// per DefaultMinInterval. A status that flaps is written once a second,
	// its latest state winning; a user's apply, wait, apply again is not
	// slowed.
	DefaultMinInterval = time.Second
	DefaultBurst       = 3
	// DefaultWorkers is how many writes are in flight at once.
	DefaultWorkers = 4
	// DefaultBackoffMin and DefaultBackoffMax bound the wait before a
	// failed write (conflict, forbidden, unavailable) is tried again.
	DefaultBackoffMin = 100 * time.Millisecond
	DefaultBackoffMax = 30 * time.Second
)

// StatusConfig has the status writer reflect, into each Kubernetes
// object's status subresource, the converge status of the table objects it
// yields, as a condition of type Reconciled (see ConditionType and the
// Reason constants):
//
//   - True when every one of its table objects is Done, with the
//     generation they were made from as observedGeneration;
//   - False with the error when an operation failed, or when Transform
//     rejected the object (which keeps its former table objects);
//   - unchanged while its objects are Pending: the old observedGeneration
//     says the new generation is not reconciled yet.
//
// It writes with server-side apply under its own field manager, so it
// owns that one condition and nothing else (the CRD's status.conditions
// must be a map list keyed by type, as for metav1.Condition), only when
// the condition changes, at most Burst times at once and then once per
// MinInterval per object. A
// conflict is retried quietly and a deleted object forgotten; any other
// failure, Forbidden included, is the job's health error and names the
// resource and object.
type StatusConfig[T Object, Obj comparable] struct {
	// Client and Resource address the status subresource. Required.
	Client   dynamic.Interface
	Resource schema.GroupVersionResource
	// APIVersion and Kind of the apply configuration, for example
	// "files.example.converge.dev/v1" and "DesiredFile". Required.
	APIVersion, Kind string

	// FieldManager is the apply field manager. Default
	// DefaultFieldManager.
	FieldManager string

	// ItemKey returns the key (Key: "namespace/name") of the Kubernetes
	// object a table object was made from. Required.
	ItemKey func(obj Obj) string
	// Generation returns the metadata.generation of the Kubernetes object
	// a table object was made from: Transform copies it into the object,
	// and Config.Source.Equal compares it, so that a new generation is
	// reconciled (and reported) even when its content is unchanged.
	// Required.
	Generation func(obj Obj) int64
	// GetObjectStatus returns the reconciler's status in a table object,
	// as in reconciler.Config. Required.
	GetObjectStatus func(obj Obj) reconciler.Status

	// Conditions reads the conditions a Kubernetes object carries now,
	// so that only a change is written (and a condition another writer
	// overwrote is restored). nil reads status.conditions, which works
	// for *unstructured.Unstructured; typed objects must set it.
	Conditions func(obj T) []metav1.Condition

	// Owns reports whether this replica writes the status of the object
	// with key (Key); with several replicas, only the owner of a key
	// writes. nil: this replica writes every status.
	Owns func(key string) bool
	// OwnsChanged, with Owns, returns a channel closed at the next change
	// of what this replica owns (reconciler.Ownership's Changed): the
	// writer then looks at every key again, and writes the conditions of
	// the keys it gained. nil: keys gained are written at their next
	// change.
	OwnsChanged func() <-chan struct{}

	// MinInterval, Burst, Workers, BackoffMin, BackoffMax: see the
	// defaults.
	MinInterval            time.Duration
	Burst                  int
	Workers                int
	BackoffMin, BackoffMax time.Duration
}

func (c *StatusConfig[T, Obj]) setDefaults() {
	if c.FieldManager == "" {
		c.FieldManager = DefaultFieldManager
	}
	if c.MinInterval == 0 {
		c.MinInterval = DefaultMinInterval
	}
	if c.Burst == 0 {
		c.Burst = DefaultBurst
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.BackoffMin == 0 {
		c.BackoffMin = DefaultBackoffMin
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = DefaultBackoffMax
	}
}

func (c *StatusConfig[T, Obj]) validate() error {
	bad := func(f string) error { return fmt.Errorf("%w: Status.%s", source.ErrInvalidConfig, f) }
	switch {
	case c.Client == nil:
		return bad("Client is required")
	case c.Resource.Resource == "":
		return bad("Resource is required")
	case c.APIVersion == "" || c.Kind == "":
		return bad("APIVersion and Kind are required")
	case c.ItemKey == nil:
		return bad("ItemKey is required")
	case c.Generation == nil:
		return bad("Generation is required")
	case c.GetObjectStatus == nil:
		return bad("GetObjectStatus is required")
	case c.MinInterval < 0 || c.Burst < 0 || c.Workers < 0 || c.BackoffMin < 0 || c.BackoffMax < c.BackoffMin:
		return bad("MinInterval, Burst, Workers, BackoffMin must not be negative, BackoffMax not below BackoffMin")
	}
	return nil
}

// conditionsReader returns how the tracker finds the Reconciled
// condition of an object.
func (c *StatusConfig[T, Obj]) conditionsReader() (func(T) (condition, bool), error) {
	if c.Conditions != nil {
		get := c.Conditions
		return func(o T) (condition, bool) { return fromMetav1(get(o)) }, nil
	}
	var zero T
	if _, ok := any(zero).(*unstructured.Unstructured); !ok {
		return nil, fmt.Errorf("%w: Status.Conditions is required for %T", source.ErrInvalidConfig, zero)
	}
	return func(o T) (condition, bool) { return unstructuredCondition(any(o).(*unstructured.Unstructured)) }, nil
}
