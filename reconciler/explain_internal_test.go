package reconciler

import (
	"testing"
	"time"
)

// TestExplainCommitting: a request whose status write is out on the
// committer is Committing, since its result was judged.
func TestExplainCommitting(t *testing.T) {
	now := time.Now()
	w := newWork[int](true)
	req := w.add("k", change[int]{obj: 1, rev: 10}, Status{Kind: StatusKindPending, ID: 7}, 10, now)
	w.takeReady(nil)
	id := req.attempt
	w.returned(req, id)
	w.writeOut(req, id)
	req.enteredAt = now
	var e Explanation
	(&reconciler[int]{}).explainRequest(&e, req, explainParts{})
	if e.State != KeyCommitting || e.Revision != 10 || !e.Since.Equal(now) {
		t.Fatalf("committing request explained as %+v", e)
	}
}
