package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/example/internal/agentkit"
	"github.com/converge-go/converge/example/internal/agenttest"
	"github.com/converge-go/converge/reconciler"
)

// fullInterval is the test's full reconciliation interval: short, so that
// drift is repaired quickly.
const fullInterval = 200 * time.Millisecond

// skipOrFail skips the test for a reason the machine gives (no nft, no
// namespaces), except in CI (CI=true), where the end-to-end test must run:
// there it fails.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: the end-to-end test must run in CI, as root, with nft, which scripts/test.sh installs)", msg)
	}
	t.Skip(msg)
}

// agent is one running firewall, in-process: the same cells as main, with
// the flags a user would give.
type agent struct {
	*agenttest.Agent
	db    *statedb.DB
	rules statedb.RWTable[*Rule]
	rec   reconciler.Reconciler[*Rule]
}

// startAgent starts the firewall with the given extra flags, listening
// on a free port of 127.0.0.1.
func startAgent(t *testing.T, flags ...string) *agent {
	t.Helper()
	a := &agent{}
	var srv *agentkit.Server
	h := newHive(cell.Invoke(func(s *agentkit.Server, db *statedb.DB, rules statedb.RWTable[*Rule], rec reconciler.Reconciler[*Rule]) {
		srv, a.db, a.rules, a.rec = s, db, rules, rec
	}))
	args := append([]string{
		"--shell-sock-path", t.TempDir() + "/shell.sock",
		"--http-addr", "127.0.0.1:0",
		"--full-reconciliation-interval", fullInterval.String(),
	}, flags...)
	a.Agent = agenttest.Start(t, h, args, func() *agentkit.Server { return srv })
	return a
}

// rule returns a desired rule with its status, as GET /rules/{name} shows it.
func (a *agent) rule(t *testing.T, name string) Rule {
	t.Helper()
	var r Rule
	body := a.Expect(t, "GET", "/rules/"+url.PathEscape(name), "", http.StatusOK, "")
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("GET /rules/%s: %s in %q", name, err, body)
	}
	return r
}

// settle waits until every change made to the table so far has settled:
// applied, or failed permanently. It waits with the reconciler's own
// progress, no polling.
func (a *agent) settle(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := a.rec.WaitUntilSettled(ctx, a.rules.Revision(a.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
}

// insert writes rules into the table directly, as another cell of a
// larger agent would, bypassing the API's checks.
func (a *agent) insert(t *testing.T, specs ...RuleSpec) {
	t.Helper()
	wtxn := a.db.WriteTxn(a.rules)
	for _, s := range specs {
		if _, _, err := a.rules.Insert(wtxn, &Rule{RuleSpec: s, Status: reconciler.StatusPending()}); err != nil {
			t.Fatal(err)
		}
	}
	wtxn.Commit()
}

// remove deletes rules from the table directly.
func (a *agent) remove(t *testing.T, names ...string) {
	t.Helper()
	wtxn := a.db.WriteTxn(a.rules)
	for _, name := range names {
		if _, _, err := a.rules.Delete(wtxn, &Rule{RuleSpec: RuleSpec{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	wtxn.Commit()
}

// otherTable is someone else's table in the namespace: the program must
// leave it alone.
const otherTable = `table inet someone_else {
	chain c {
		type filter hook input priority 10; policy accept;
		tcp dport 4242 accept comment "not ours"
	}
}
`

func TestEndToEnd(t *testing.T) {
	tn := newTestNamespace(t)
	tn.run(t, otherTable, "-f", "-")
	othersBefore := tn.run(t, "", "list", "table", "inet", "someone_else")
	a := startAgent(t, "--netns", tn.ns.Path())

	// The first Sync loads the base ruleset: no rules yet.
	eventually(t, "the empty table", func() error { return tn.matches(t.Context(), nil) })

	// Desired rules are applied, in name order, whatever the comment
	// holds that nft could misread.
	a.Expect(t, "PUT", "/rules/ssh", `{"protocol": "tcp", "port": 22, "comment": "ssh"}`, http.StatusCreated, `"kind": "Pending"`)
	a.Expect(t, "PUT", "/rules/dns", `{"protocol": "udp", "port": 53}`, http.StatusCreated, `"name": "dns"`)
	a.Expect(t, "PUT", "/rules/web", `{"protocol": "tcp", "port": 8000, "end_port": 8099, "comment": "it's ünï \\ $x {}; # ok"}`,
		http.StatusCreated, `"end_port": 8099`)
	a.settle(t)
	expected := []RuleSpec{
		{Name: "dns", Protocol: "udp", Port: 53},
		{Name: "ssh", Protocol: "tcp", Port: 22, Comment: "ssh"},
		{Name: "web", Protocol: "tcp", Port: 8000, EndPort: 8099, Comment: `it's ünï \ $x {}; # ok`},
	}
	if err := tn.matches(t.Context(), expected); err != nil {
		t.Fatal(err)
	}
	for _, spec := range expected {
		if r := a.rule(t, spec.Name); r.Status.Kind != reconciler.StatusKindDone {
			t.Fatalf("%s: status %s, want Done", spec.Name, r.Status)
		}
	}
	a.Expect(t, "GET", "/ruleset", "", http.StatusOK, `tcp dport 8000-8099 accept comment "web: it's ünï \ $x {}; # ok"`)

	// A change and a delete.
	a.Expect(t, "PUT", "/rules/ssh", `{"protocol": "tcp", "port": 2222, "comment": "ssh"}`, http.StatusOK, `"port": 2222`)
	a.Expect(t, "DELETE", "/rules/dns", "", http.StatusNoContent, "")
	a.settle(t)
	expected = expected[1:]
	expected[0].Port = 2222
	if err := tn.matches(t.Context(), expected); err != nil {
		t.Fatal(err)
	}

	t.Run("bad requests change nothing", func(t *testing.T) {
		ok := `{"protocol": "tcp", "port": 1}`
		for _, c := range []struct {
			method, path, body string
			status             int
			want               string
		}{
			{"PUT", "/rules/.hidden", ok, 400, `name \".hidden\"`},
			{"PUT", "/rules/a%20b", ok, 400, `name \"a b\"`},
			{"PUT", "/rules/x", `{"protocol": "icmp", "port": 1}`, 400, `protocol \"icmp\"`},
			{"PUT", "/rules/x", `{"protocol": "tcp", "port": 70000}`, 400, "port 70000: want 1 to 65535"},
			{"PUT", "/rules/x", `{"protocol": "tcp", "port": 9, "end_port": 8}`, 400, "end_port 8"},
			{"PUT", "/rules/x", `{"protocol": "tcp", "port": 1, "comment": "\""}`, 400, "no double quotes"},
			{"PUT", "/rules/x", `{"protocol": "tcp"}`, 400, `\"port\" is missing`},
			{"PUT", "/rules/x", `{"protocol": "tcp", "port": 1, "porta": 2}`, 400, `unknown field \"porta\"`},
			{"PUT", "/rules/x", "", 400, "empty body"},
			{"PUT", "/rules/x", `{"protocol": "tcp", "port": 1, "comment": "` + strings.Repeat("c", maxBodySize) + `"}`, 413, "the request body is over"},
			{"GET", "/rules/x", "", 404, `no desired rule \"x\"`},
			{"DELETE", "/rules/x", "", 404, `no desired rule \"x\"`},
			{"POST", "/rules", ok, 405, ""},
		} {
			a.Expect(t, c.method, c.path, c.body, c.status, c.want)
		}
		a.settle(t)
		if err := tn.matches(t.Context(), expected); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("invalid rules fail alone", func(t *testing.T) {
		// Rules another writer put in the table, which the API would
		// have refused; and one that passes our checks but not nft's.
		a.insert(t,
			RuleSpec{Name: "badport", Protocol: "tcp", Port: 70000},
			RuleSpec{Name: "badproto", Protocol: "icmp", Port: 1},
			RuleSpec{Name: "bad name", Protocol: "tcp", Port: 1},
		)
		long := strings.Repeat("x", 150)
		a.Expect(t, "PUT", "/rules/long", `{"protocol": "udp", "port": 5353, "comment": "`+long+`"}`, http.StatusCreated, "")
		a.Expect(t, "PUT", "/rules/ntp", `{"protocol": "udp", "port": 123}`, http.StatusCreated, "")
		a.settle(t)

		for name, want := range map[string]string{
			"badport":  "port 70000: want 1 to 65535",
			"badproto": `protocol "icmp"`,
			"bad name": `name "bad name"`,
			"long":     "nft rejects rule long: comment too long",
		} {
			if r := a.rule(t, name); r.Status.Kind != reconciler.StatusKindError || !strings.Contains(r.Status.Error, want) {
				t.Errorf("%s: status %s %q, want Error containing %q", name, r.Status.Kind, r.Status.Error, want)
			}
		}
		if r := a.rule(t, "ntp"); r.Status.Kind != reconciler.StatusKindDone {
			t.Fatalf("ntp: status %s, want Done", r.Status)
		}
		expected = byName(append(expected, RuleSpec{Name: "ntp", Protocol: "udp", Port: 123}))
		if err := tn.matches(t.Context(), expected); err != nil {
			t.Fatal(err)
		}
		a.Expect(t, "GET", "/healthz", "", http.StatusServiceUnavailable, "long: nft rejects rule long")

		// Fixed or removed, they are applied or gone, and health is back.
		a.Expect(t, "PUT", "/rules/long", `{"protocol": "udp", "port": 5353, "comment": "mdns"}`, http.StatusOK, "")
		a.remove(t, "badport", "badproto", "bad name")
		a.settle(t)
		expected = byName(append(expected, RuleSpec{Name: "long", Protocol: "udp", Port: 5353, Comment: "mdns"}))
		if err := tn.matches(t.Context(), expected); err != nil {
			t.Fatal(err)
		}
		a.Expect(t, "GET", "/healthz", "", http.StatusOK, "ok")
	})

	t.Run("drift is repaired", func(t *testing.T) {
		// Deleted behind its back: back at the next full reconciliation.
		tn.run(t, "", "delete", "table", tableFamily, tableName)
		eventually(t, "the table restored", func() error { return tn.matches(t.Context(), expected) })

		// A stray rule and a changed policy, in one nft transaction
		// (the next full reconciliation may come at any time): undone
		// too, here at once on request.
		tn.run(t, "add rule inet converge_firewall input tcp dport 9999 accept comment \"stray\"\n"+
			"chain inet converge_firewall input { policy accept; }\n", "-f", "-")
		a.rec.TriggerFullReconciliation()
		eventually(t, "the stray rule removed", func() error { return tn.matches(t.Context(), expected) })
	})

	t.Run("operator endpoints", func(t *testing.T) {
		a.Expect(t, "GET", "/metrics", "", http.StatusOK,
			`converge_reconciler_operations_total{module_id="firewall",name="",op="sync",result="ok"}`)
		a.Expect(t, "GET", "/status", "", http.StatusOK, `"table": "desired-rules"`)
		a.Expect(t, "GET", "/", "", http.StatusOK, "PUT    /rules/{name}")
	})

	t.Run("nothing changes after stop", func(t *testing.T) {
		a.Stop()
		if err := tn.matches(t.Context(), expected); err != nil {
			t.Fatalf("after stop: %s", err)
		}
		// Delete the table behind its back, and watch for longer than
		// several full reconciliation intervals: a negative check, so
		// it needs a window; nothing is waited for within it.
		tn.run(t, "", "delete", "table", tableFamily, tableName)
		window := time.After(5 * fullInterval)
		for done := false; !done; {
			select {
			case <-window:
				done = true
			case <-time.After(fullInterval / 2):
			}
			if _, err := tn.live(t.Context()); err == nil {
				t.Fatal("the table came back after the hive stopped")
			}
		}
	})

	// Someone else's table was never touched.
	if got := tn.run(t, "", "list", "table", "inet", "someone_else"); got != othersBefore {
		t.Fatalf("someone else's table changed:\n%s\nto\n%s", othersBefore, got)
	}
}

// TestPrivateNamespace runs the firewall as "go run ./example/firewall"
// does, in a namespace of its own, and checks through the API that it
// works there and that the host's namespace is left alone.
func TestPrivateNamespace(t *testing.T) {
	newTestNamespace(t) // skips, or fails in CI, without nft or namespaces
	a := startAgent(t)
	a.Expect(t, "PUT", "/rules/ssh", `{"protocol": "tcp", "port": 22}`, http.StatusCreated, "")
	a.settle(t)
	if r := a.rule(t, "ssh"); r.Status.Kind != reconciler.StatusKindDone {
		t.Fatalf("ssh: status %s, want Done", r.Status)
	}
	a.Expect(t, "GET", "/ruleset", "", http.StatusOK, `tcp dport 22 accept comment "ssh"`)
	path, _ := findNft("nft")
	if out, err := exec.CommandContext(t.Context(), path, "list", "table", tableFamily, tableName).CombinedOutput(); err == nil {
		t.Fatalf("the table is in the host's namespace:\n%s", out)
	}
}
