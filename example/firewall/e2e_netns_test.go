package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/converge-go/converge/example/internal/agenttest"
)

// The end-to-end tests' network namespace and nft listing (e2e_test.go).

// testNamespace is a network namespace the test made, and nft in it, to
// look at the table as someone else on the machine would.
type testNamespace struct {
	ns  *netns
	nft *nftCmd
}

// newTestNamespace makes a private network namespace, or skips (or in CI
// fails) with what is missing.
func newTestNamespace(t *testing.T) *testNamespace {
	t.Helper()
	path, err := findNft("nft")
	if err != nil {
		skipOrFail(t, "the end-to-end test needs nft: %v", err)
	}
	ns, err := newPrivateNetns()
	if err != nil {
		skipOrFail(t, "the end-to-end test needs a network namespace (run as root): %v", err)
	}
	t.Cleanup(func() { ns.Close() })
	tn := &testNamespace{ns: ns, nft: &nftCmd{path: path, ns: ns}}
	if _, err := tn.nft.Run(t.Context(), "", "list", "tables"); err != nil {
		skipOrFail(t, "nft does not work in a network namespace here: %v", err)
	}
	return tn
}

// run runs nft in the namespace with script on its input, and fails the
// test if it fails.
func (tn *testNamespace) run(t *testing.T, script string, args ...string) string {
	t.Helper()
	out, err := tn.nft.Run(t.Context(), script, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// liveTable is the program's table as nft -j lists it: the input chain's
// policy, how many rules without a comment (the base rules) it has, and
// the rules with one, read back into RuleSpecs.
type liveTable struct {
	policy string
	base   int
	rules  []RuleSpec
}

// nftListing is the part of nft's JSON listing the test reads.
type nftListing struct {
	Nftables []struct {
		Chain *struct {
			Name   string `json:"name"`
			Policy string `json:"policy"`
		} `json:"chain"`
		Rule *struct {
			Comment string                       `json:"comment"`
			Expr    []map[string]json.RawMessage `json:"expr"`
		} `json:"rule"`
	} `json:"nftables"`
}

// nftMatch is the match of a port rule: {"left": {"payload":
// {"protocol": "tcp", "field": "dport"}}, "right": 22 or {"range": [8000,
// 8099]}}.
type nftMatch struct {
	Left struct {
		Payload struct {
			Protocol string `json:"protocol"`
			Field    string `json:"field"`
		} `json:"payload"`
	} `json:"left"`
	Right json.RawMessage `json:"right"`
}

// live lists the table with nft -j and parses it. It fails when the table
// is not there.
func (tn *testNamespace) live(ctx context.Context) (liveTable, error) {
	out, err := tn.nft.Run(ctx, "", "-j", "list", "table", tableFamily, tableName)
	if err != nil {
		return liveTable{}, err
	}
	var listing nftListing
	if err := json.Unmarshal([]byte(out), &listing); err != nil {
		return liveTable{}, fmt.Errorf("nft -j: %w in %s", err, out)
	}
	var lt liveTable
	for _, item := range listing.Nftables {
		switch {
		case item.Chain != nil && item.Chain.Name == chainName:
			lt.policy = item.Chain.Policy
		case item.Rule != nil && item.Rule.Comment == "":
			lt.base++
		case item.Rule != nil:
			spec, err := parseListedRule(item.Rule.Comment, item.Rule.Expr)
			if err != nil {
				return liveTable{}, err
			}
			lt.rules = append(lt.rules, spec)
		}
	}
	return lt, nil
}

// parseListedRule reads one of the program's rules back from nft's JSON.
func parseListedRule(comment string, expr []map[string]json.RawMessage) (RuleSpec, error) {
	spec := RuleSpec{}
	spec.Name, spec.Comment, _ = strings.Cut(comment, ": ")
	if len(expr) != 2 || expr[1]["accept"] == nil {
		return spec, fmt.Errorf("rule %q: want a match and accept, got %v", comment, expr)
	}
	var m nftMatch
	if err := json.Unmarshal(expr[0]["match"], &m); err != nil || m.Left.Payload.Field != "dport" {
		return spec, fmt.Errorf("rule %q: not a port match: %s (%v)", comment, expr[0]["match"], err)
	}
	spec.Protocol = m.Left.Payload.Protocol
	var rng struct{ Range [2]int }
	if err := json.Unmarshal(m.Right, &spec.Port); err != nil {
		if err := json.Unmarshal(m.Right, &rng); err != nil {
			return spec, fmt.Errorf("rule %q: ports %s: %w", comment, m.Right, err)
		}
		spec.Port, spec.EndPort = rng.Range[0], rng.Range[1]
	}
	return spec, nil
}

// matches returns nil when the table holds exactly the base rules and
// want, in order, with the drop policy; else how it differs.
func (tn *testNamespace) matches(ctx context.Context, want []RuleSpec) error {
	lt, err := tn.live(ctx)
	if err != nil {
		return err
	}
	if lt.policy != "drop" || lt.base != 2 || !slices.Equal(lt.rules, want) {
		return fmt.Errorf("table has policy %q, %d base rules and %+v; want drop, 2 and %+v", lt.policy, lt.base, lt.rules, want)
	}
	return nil
}

// byName sorts specs by name, the order of the rules in the table.
func byName(specs []RuleSpec) []RuleSpec {
	slices.SortFunc(specs, func(a, b RuleSpec) int { return strings.Compare(a.Name, b.Name) })
	return specs
}

// eventually waits until check passes, looking every 20ms for at most
// 10s. It is for what the program does on its own time: repairs at the
// next full reconciliation, seen only in the namespace.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	agenttest.Eventually(t, what, 10*time.Second, 20*time.Millisecond, check)
}
