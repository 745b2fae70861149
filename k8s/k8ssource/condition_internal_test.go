package k8ssource

import (
	"testing"

	"github.com/converge-go/converge/reconciler"
)

// The condition of a Kubernetes object from its table rows: True only when
// every row is Done; not yet while one waits; a failure before an Unset
// row; an Unset row (left alone by the reconciler) never reads as
// reconciled.
func TestConditionFromRows(t *testing.T) {
	done := rowState{kind: reconciler.StatusKindDone, gen: 3}
	for _, tc := range []struct {
		name   string
		rows   map[string]rowState
		ok     bool
		status string
		reason string
	}{
		{"all done", map[string]rowState{"a": done, "b": done}, true, "True", ReasonReconciled},
		{"one pending", map[string]rowState{"a": done, "b": {kind: reconciler.StatusKindPending}}, false, "", ""},
		{"one refreshing", map[string]rowState{"a": {kind: reconciler.StatusKindRefreshing}}, false, "", ""},
		{"one failed", map[string]rowState{"a": done, "b": {kind: reconciler.StatusKindError, err: "boom"}}, true, "False", ReasonReconcileFailed},
		{"one unset", map[string]rowState{"a": done, "b": {kind: reconciler.StatusKindUnset}}, true, "False", ReasonNotReconciled},
		{"failed and unset", map[string]rowState{"a": {kind: reconciler.StatusKindError, err: "boom"}, "b": {kind: reconciler.StatusKindUnset}}, true, "False", ReasonReconcileFailed},
	} {
		c, ok := fromRows(tc.rows)
		if ok != tc.ok || string(c.Status) != tc.status || c.Reason != tc.reason {
			t.Errorf("%s: condition %+v, %v; want %s %s, %v", tc.name, c, ok, tc.status, tc.reason, tc.ok)
		}
	}
}
