package k8ssource

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// DefaultConditionType is the type of the condition the status writer
// owns unless StatusConfig.ConditionType says otherwise. A user waits for
// it with
//
//	kubectl wait --for=condition=Reconciled desiredfile/motd
//
// which also waits for its observedGeneration to reach the object's
// generation. Tools that read kstatus (kubectl's and Flux's health
// checks, Argo CD, cli-utils) look for "Ready" instead.
const DefaultConditionType = "Reconciled"

// ConditionType is DefaultConditionType, under its former name.
//
// Deprecated: use DefaultConditionType, or StatusConfig.ConditionType.
const ConditionType = DefaultConditionType

// StalledConditionType is the condition StatusConfig.Stalled adds while
// an object fails: kstatus reads Stalled=True as Failed.
const StalledConditionType = "Stalled"

// Reasons of the condition.
const (
	// ReasonReconciled: every table object of the Kubernetes object is
	// Done, or it yields none (status True).
	ReasonReconciled = "Reconciled"
	// ReasonReconciling: a new object's table objects are not reconciled
	// yet (status False). Written once, for an object that carries no
	// condition of this type yet, so that a tool that waits reads "not
	// yet" rather than nothing; a new generation of an object that has
	// one is told by the condition's observedGeneration instead.
	ReasonReconciling = "Reconciling"
	// ReasonReconcileFailed: an operation on one of its objects failed;
	// the message is the error (status False). It is retried.
	ReasonReconcileFailed = "ReconcileFailed"
	// ReasonTransformFailed: the object's spec could not be turned into
	// table objects; the message is the error (status False). The objects
	// it had before are kept, and reconciled as they were.
	ReasonTransformFailed = "TransformFailed"
	// ReasonCleanupFailed: the Delete of one of the table objects it no
	// longer yields (or, with a finalizer, of any, while it is being
	// deleted) failed; the message is the error (status False). It is
	// retried.
	ReasonCleanupFailed = "CleanupFailed"
	// ReasonCleaningUp: the object is being deleted and holds the
	// finalizer until the Deletes of its table objects have succeeded
	// (status False).
	ReasonCleaningUp = "CleaningUp"
	// ReasonConflict: another object of the source holds a table key
	// this one asks for; the message names it (status False). The other
	// table objects it yields are kept; it gets the key once the holder
	// no longer asks for it (see Config.Transform).
	ReasonConflict = "Conflict"
	// ReasonNotReconciled: one of its objects is in the table with the
	// status Unset, which the reconciler leaves alone until it is set
	// Pending (status False).
	ReasonNotReconciled = "NotReconciled"
)

// failure reports whether a condition of reason says the object fails:
// the reasons a Stalled condition accompanies, and Warning Events report.
func failure(reason string) bool {
	return reason == ReasonReconcileFailed || reason == ReasonTransformFailed || reason == ReasonCleanupFailed || reason == ReasonConflict
}

// condition is the part of the writer's condition that decides whether
// it must be written: lastTransitionTime follows from it.
type condition struct {
	Status             metav1.ConditionStatus
	Reason             string
	Message            string
	ObservedGeneration int64
	LastTransitionTime time.Time
}

func (c condition) same(o condition) bool {
	return c.Status == o.Status && c.Reason == o.Reason && c.Message == o.Message &&
		c.ObservedGeneration == o.ObservedGeneration
}

// observed is what an object's status says of the writer's fields.
type observed struct {
	cond    condition
	hasCond bool
	// stalled: a Stalled condition of status True is there.
	stalled bool
	// topGen is status.observedGeneration; hasTopGen whether it is set.
	topGen    int64
	hasTopGen bool
}

// matches reports whether the object already carries c, as the writer
// of cfg would write it.
func (o observed) matches(c condition, stalled, topGen bool) bool {
	if !o.hasCond || !o.cond.same(c) {
		return false
	}
	if stalled && o.stalled != failure(c.Reason) {
		return false
	}
	return !topGen || (o.hasTopGen && o.topGen == c.ObservedGeneration)
}

// fromMetav1 finds the condition of type typ in conds.
func fromMetav1(conds []metav1.Condition, typ string) observed {
	var o observed
	for _, c := range conds {
		switch c.Type {
		case typ:
			o.cond = condition{c.Status, c.Reason, c.Message, c.ObservedGeneration, c.LastTransitionTime.Time}
			o.hasCond = true
		case StalledConditionType:
			o.stalled = c.Status == metav1.ConditionTrue
		}
	}
	return o
}

// fromUnstructured reads the writer's fields from an unstructured
// object's status, without copying them.
func fromUnstructured(u map[string]any, typ string) observed {
	var o observed
	switch g := nested(u, "status", "observedGeneration").(type) {
	case int64:
		o.topGen, o.hasTopGen = g, true
	case float64:
		o.topGen, o.hasTopGen = int64(g), true
	}
	list, _ := nested(u, "status", "conditions").([]any)
	for _, e := range list {
		m, _ := e.(map[string]any)
		t, _ := m["type"].(string)
		s, _ := m["status"].(string)
		switch t {
		case typ:
			o.cond, o.hasCond = conditionOf(m), true
		case StalledConditionType:
			o.stalled = s == string(metav1.ConditionTrue)
		}
	}
	return o
}

func nested(u map[string]any, fields ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(u, fields...)
	return v
}

// conditionOf reads one condition of an unstructured list.
func conditionOf(m map[string]any) condition {
	var c condition
	s, _ := m["status"].(string)
	c.Status = metav1.ConditionStatus(s)
	c.Reason, _ = m["reason"].(string)
	c.Message, _ = m["message"].(string)
	switch g := m["observedGeneration"].(type) {
	case int64:
		c.ObservedGeneration = g
	case float64:
		c.ObservedGeneration = int64(g)
	}
	if ts, _ := m["lastTransitionTime"].(string); ts != "" {
		c.LastTransitionTime, _ = time.Parse(time.RFC3339, ts)
	}
	return c
}

// statusBody is the server-side apply configuration of the status: only
// the writer's fields, so that its field manager owns nothing else. The
// conditions must be a map list keyed by type (the writer checks, see
// verify), or an apply would replace the other managers' conditions.
func statusBody(cfg *statusFields, namespace, name string, c condition) *unstructured.Unstructured {
	md := map[string]any{"name": name}
	if namespace != "" {
		md["namespace"] = namespace
	}
	entry := func(typ string, status metav1.ConditionStatus) map[string]any {
		return map[string]any{
			"type":               typ,
			"status":             string(status),
			"reason":             c.Reason,
			"message":            c.Message,
			"observedGeneration": c.ObservedGeneration,
			"lastTransitionTime": c.LastTransitionTime.UTC().Format(time.RFC3339),
		}
	}
	conds := []any{entry(cfg.conditionType, c.Status)}
	if cfg.stalled && failure(c.Reason) {
		// Left out when the object does not fail: the apply then
		// removes the Stalled condition this manager set.
		conds = append(conds, entry(StalledConditionType, metav1.ConditionTrue))
	}
	status := map[string]any{"conditions": conds}
	if cfg.observedGeneration {
		status["observedGeneration"] = c.ObservedGeneration
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": cfg.apiVersion,
		"kind":       cfg.kind,
		"metadata":   md,
		"status":     status,
	}}
}

// statusFields is what shapes the writer's apply configuration.
type statusFields struct {
	apiVersion, kind   string
	conditionType      string
	stalled            bool
	observedGeneration bool
}
