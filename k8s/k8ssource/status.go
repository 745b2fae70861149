package k8ssource

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	eventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"

	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
)

// Defaults of StatusConfig.
const (
	// DefaultFieldManager is the server-side apply field manager of the
	// status writer, and the reporting controller of its Events.
	DefaultFieldManager = "converge"
	// DefaultMinInterval and DefaultBurst limit the writes of one object
	// (a token bucket per object): DefaultBurst writes at once, then one
	// per DefaultMinInterval. A status that flaps is written once a
	// second, its latest state winning. The first condition of each new
	// generation (its Reconciling, and the outcome that follows) is
	// written at once and takes no token, so a user's apply, wait, apply
	// again is never slowed.
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
// object's status subresource, the converge status of the table objects
// it yields, as one condition (ConditionType, "Reconciled" by default;
// see the Reason constants):
//
//   - True when every one of its table objects is Done, and the Deletes
//     of those it no longer yields have succeeded; True too when it
//     yields none (nothing to do);
//   - False with the error when an operation failed (ReconcileFailed,
//     CleanupFailed), or when Transform rejected the object
//     (TransformFailed; it keeps its former table objects), or another
//     object holds a table key it asks for (Conflict);
//   - False (Reconciling) for a new object whose table objects are not
//     reconciled yet; an object that has a condition keeps it while a
//     new generation is reconciled: its observedGeneration says which
//     generation it speaks of.
//
// Its observedGeneration is always the generation of the object the
// condition speaks of. It writes with server-side apply under its own
// field manager, so it owns that condition (and Stalled and
// status.observedGeneration when asked) and nothing else, only when the
// condition changes, rate limited per object. Before its first write it
// checks, with a dry-run apply, that the resource has a status
// subresource and that status.conditions is a map list keyed by type: if
// not, its health says so and names the CRD, and it writes nothing. A
// conflict is retried quietly and a deleted object forgotten; any other
// failure, Forbidden included, is the job's health error and names the
// resource and object.
//
// The writer reads only the table objects this source's Transform
// yielded for the object (by primary key, and equal by Source.Equal to
// what it yielded), never another writer's row of the same key.
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

	// ConditionType is the condition's type. Default
	// DefaultConditionType. For kstatus (kubectl's, Flux's and Argo CD's
	// health checks) set "Ready", with ObservedGeneration and Stalled.
	ConditionType string
	// ObservedGeneration also writes status.observedGeneration, the
	// generation the condition speaks of, which kstatus compares with
	// metadata.generation: a newer generation reads InProgress.
	ObservedGeneration bool
	// Stalled also writes a Stalled condition, True, while the object
	// fails (ReconcileFailed, TransformFailed, CleanupFailed), and removes
	// it once it does not: kstatus reads it as Failed. Conflict counts as
	// failing too.
	Stalled bool

	// ItemKey returns the key (Key: "namespace/name") of the Kubernetes
	// object a table object was made from. Required.
	ItemKey func(obj Obj) string
	// Generation is not used any more: the generation comes from the
	// object Transform was given.
	//
	// Deprecated: leave it nil.
	Generation func(obj Obj) int64
	// GetObjectStatus returns the reconciler's status in a table object,
	// as in reconciler.Config. Required.
	GetObjectStatus func(obj Obj) reconciler.Status

	// Conditions reads the conditions a Kubernetes object carries now,
	// so that only a change is written (and a condition another writer
	// overwrote is restored). nil reads status.conditions (and
	// status.observedGeneration) of the object, converted to
	// unstructured form when it is typed. It cannot be combined with
	// ObservedGeneration.
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

	// Events, when set, records an Event (events.k8s.io/v1) on the object
	// at each change of its condition's reason or generation: Normal
	// Reconciled, Warning ReconcileFailed, TransformFailed, CleanupFailed
	// or Conflict. They are rate limited per object (EventBurst, then
	// one per EventInterval) and, through client-go's events library,
	// repeats are folded into a series. Typically
	// clientset.EventsV1(). It needs create and patch on
	// events.events.k8s.io.
	Events eventsv1.EventsV1Interface
	// EventTypes chooses which Events are recorded when Events is set:
	// EventsAll (the default), EventsWarnings (only the failures: at
	// scale the Normal Reconciled Events are a third of all requests),
	// or EventsNone.
	EventTypes EventTypes

	// Metrics receives the writer's measurements. nil:
	// Params.DefaultMetrics if it implements Metrics, else none.
	Metrics Metrics

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
	if c.ConditionType == "" {
		c.ConditionType = DefaultConditionType
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
	case c.GetObjectStatus == nil:
		return bad("GetObjectStatus is required")
	case c.ConditionType == StalledConditionType && c.Stalled:
		return bad("ConditionType must not be Stalled when Stalled is set")
	case c.Conditions != nil && c.ObservedGeneration:
		return bad("Conditions cannot read status.observedGeneration: leave it nil with ObservedGeneration")
	case c.EventTypes > EventsNone:
		return bad("EventTypes must be EventsAll, EventsWarnings or EventsNone")
	case c.MinInterval < 0 || c.Burst < 0 || c.Workers < 0 || c.BackoffMin < 0 || c.BackoffMax < c.BackoffMin:
		return bad("MinInterval, Burst, Workers, BackoffMin must not be negative, BackoffMax not below BackoffMin")
	}
	return nil
}

func (c *StatusConfig[T, Obj]) fields() *statusFields {
	return &statusFields{
		apiVersion: c.APIVersion, kind: c.Kind, conditionType: c.ConditionType,
		stalled: c.Stalled, observedGeneration: c.ObservedGeneration,
	}
}

// observer returns how the tracker reads the writer's fields from an
// object.
func (c *StatusConfig[T, Obj]) observer() func(T) observed {
	typ := c.ConditionType
	if c.Conditions != nil {
		get := c.Conditions
		return func(o T) observed { return fromMetav1(get(o), typ) }
	}
	var zero T
	if _, ok := any(zero).(*unstructured.Unstructured); ok {
		return func(o T) observed { return fromUnstructured(any(o).(*unstructured.Unstructured).Object, typ) }
	}
	return func(o T) observed {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return observed{} // written again: the writer knows no better
		}
		return fromUnstructured(u, typ)
	}
}
