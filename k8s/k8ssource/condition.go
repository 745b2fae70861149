package k8ssource

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ConditionType is the type of the condition the status writer owns. A
// user waits for it with
//
//	kubectl wait --for=condition=Reconciled desiredfile/motd
//
// which also waits for its observedGeneration to reach the object's
// generation.
const ConditionType = "Reconciled"

// Reasons of the Reconciled condition.
const (
	// ReasonReconciled: every table object of the Kubernetes object is
	// Done (status True).
	ReasonReconciled = "Reconciled"
	// ReasonReconcileFailed: an operation on one of its objects failed;
	// the message is the error (status False). It is retried.
	ReasonReconcileFailed = "ReconcileFailed"
	// ReasonTransformFailed: the object's spec could not be turned into
	// table objects; the message is the error (status False). The objects
	// it had before are kept, and reconciled as they were.
	ReasonTransformFailed = "TransformFailed"
	// ReasonNotReconciled: one of its objects is in the table with the
	// status Unset, which the reconciler leaves alone until it is set
	// Pending (status False).
	ReasonNotReconciled = "NotReconciled"
)

// maxMessage bounds the message: metav1.Condition allows 32768 bytes.
const maxMessage = 4096

// condition is the part of a Reconciled condition that decides whether
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

func truncate(s string) string {
	if len(s) > maxMessage {
		return s[:maxMessage-3] + "..."
	}
	return s
}

// fromMetav1 finds the Reconciled condition in conds.
func fromMetav1(conds []metav1.Condition) (condition, bool) {
	for _, c := range conds {
		if c.Type == ConditionType {
			return condition{c.Status, c.Reason, c.Message, c.ObservedGeneration, c.LastTransitionTime.Time}, true
		}
	}
	return condition{}, false
}

// unstructuredCondition finds the Reconciled condition in the
// status.conditions of an unstructured object, without copying them.
func unstructuredCondition(u *unstructured.Unstructured) (condition, bool) {
	v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "conditions")
	if !ok {
		return condition{}, false
	}
	list, _ := v.([]any)
	for _, e := range list {
		m, _ := e.(map[string]any)
		if t, _ := m["type"].(string); t != ConditionType {
			continue
		}
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
		return c, true
	}
	return condition{}, false
}

// applyBody is the server-side apply configuration of the status: only
// the Reconciled condition, so that the field manager owns nothing else.
// The CRD must declare status.conditions a map list keyed by type
// (x-kubernetes-list-type: map, x-kubernetes-list-map-keys: [type]), as
// metav1.Condition lists are, or an apply would replace the other
// managers' conditions.
func applyBody(apiVersion, kind, namespace, name string, c condition) *unstructured.Unstructured {
	md := map[string]any{"name": name}
	if namespace != "" {
		md["namespace"] = namespace
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata":   md,
		"status": map[string]any{
			"conditions": []any{map[string]any{
				"type":               ConditionType,
				"status":             string(c.Status),
				"reason":             c.Reason,
				"message":            c.Message,
				"observedGeneration": c.ObservedGeneration,
				"lastTransitionTime": c.LastTransitionTime.UTC().Format(time.RFC3339),
			}},
		},
	}}
}
