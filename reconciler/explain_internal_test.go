package reconciler

import (
	"testing"
	"time"
)

// TestExplainCommitting: a request whose status write is out on the
// committer is Committing, since its result was judged.
func TestExplainCommitting(t *testing.T) {
	now := time.Now()
	tb := newTestTable(true)
	req := tb.add("k", change[int]{obj: 1, rev: 10}, Status{Kind: StatusKindPending, ID: 7}, 10, now)
	takeReady(tb, nil, 0, now)
	id := req.attempt
	tb.returned(req, id, now)
	tb.writeOut(req, id, now)
	var e Explanation
	explainRow(&e, req, explainParts{})
	if e.State != KeyCommitting || e.Revision != 10 || !e.Since.Equal(now) {
		t.Fatalf("committing request explained as %+v", e)
	}
}
