package k8ssource

import (
	"testing"

	"github.com/converge-go/converge/reconciler"
)

// The condition of a Kubernetes object from its table rows: True when
// every row is Done, or when there is none (nothing to do); not yet
// while one waits; a failure before an Unset row; an Unset row (left
// alone by the reconciler) never reads as reconciled.
func TestConditionFromRows(t *testing.T) {
	done := rowState{kind: reconciler.StatusKindDone}
	failed := rowState{kind: reconciler.StatusKindError, err: "boom"}
	unset := rowState{kind: reconciler.StatusKindUnset}
	for _, tc := range []struct {
		name   string
		rows   []rowState
		ok     bool
		status string
		reason string
	}{
		{"all done", []rowState{done, done}, true, "True", ReasonReconciled},
		{"no rows", nil, true, "True", ReasonReconciled},
		{"one pending", []rowState{done, {kind: reconciler.StatusKindPending}}, false, "", ""},
		{"one refreshing", []rowState{{kind: reconciler.StatusKindRefreshing}}, false, "", ""},
		{"one failed", []rowState{done, failed}, true, "False", ReasonReconcileFailed},
		{"one unset", []rowState{done, unset}, true, "False", ReasonNotReconciled},
		{"failed and unset", []rowState{failed, unset}, true, "False", ReasonReconcileFailed},
	} {
		c, ok := fromRows(tc.rows)
		if ok != tc.ok || string(c.Status) != tc.status || c.Reason != tc.reason {
			t.Errorf("%s: condition %+v, %v; want %s %s, %v", tc.name, c, ok, tc.status, tc.reason, tc.ok)
		}
	}
}
