package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb/index"

	"github.com/converge-go/converge/reconciler"
)

// TestExplainFile: GET /explain/{name} says where a file stands and why:
// Done once written; Retrying with the cause while a directory blocks it;
// Absent once its Delete is done. ?json gives the same as JSON.
func TestExplainFile(t *testing.T) {
	a, err := startAgent(t, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	a.Expect(t, "PUT", "/files/ok.txt", `{"content": "ok"}`, http.StatusCreated, "")
	a.settle(t)
	a.Expect(t, "GET", "/explain/ok.txt", "", http.StatusOK, `"ok.txt": Done`)

	if err := os.Mkdir(filepath.Join(a.dir, "blocked.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	a.Expect(t, "PUT", "/files/blocked.txt", `{"content": "b"}`, http.StatusCreated, "")
	a.attempted(t)
	// Failed, and waiting for its retry (or, for a moment, retrying).
	e := a.waitExplain(t, "blocked.txt", func(e reconciler.Explanation) bool {
		return e.LastError != "" && (e.State == reconciler.KeyRetrying || e.State == reconciler.KeyRunning)
	})
	if !strings.Contains(e.LastError, "blocked.txt is a directory") || e.Attempts < 1 {
		t.Fatalf("explanation %+v", e)
	}
	body := a.Expect(t, "GET", "/explain/blocked.txt?json", "", http.StatusOK, `"key": "blocked.txt"`)
	var decoded reconciler.Explanation
	if err := json.Unmarshal([]byte(body), &decoded); err != nil || decoded.LastError == "" {
		t.Fatalf("?json: %v in %s", err, body)
	}
	a.Expect(t, "GET", "/explain/blocked.txt", "", http.StatusOK, "last error: ")

	a.Expect(t, "DELETE", "/files/ok.txt", "", http.StatusNoContent, "")
	deleted := a.files.Revision(a.db.ReadTxn())
	a.waitExplain(t, "ok.txt", func(e reconciler.Explanation) bool {
		return e.State == reconciler.KeyAbsent && e.ReadTo >= deleted
	})
	a.Expect(t, "GET", "/explain/ok.txt", "", http.StatusOK, `"ok.txt": Absent`)
}

// waitExplain explains name until ok accepts the answer.
func (a *agent) waitExplain(t *testing.T, name string, ok func(reconciler.Explanation) bool) reconciler.Explanation {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		e, err := a.rec.Explain(ctx, index.String(name))
		if err != nil {
			t.Fatalf("Explain(%s): %v", name, err)
		}
		if ok(e) {
			return e
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never explained as wanted; last:\n%s", name, e)
		case <-e.Changed:
		}
	}
}
