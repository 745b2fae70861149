package main

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"testing"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// fakeNft stands in for nft: it rejects the rules it is told to, with or
// without the line, the way nft reports errors, and records the scripts
// loaded.
type fakeNft struct {
	located   map[string]string // rule name -> message given with the rule's line
	unlocated map[string]string // rule name -> message given without a line
	together  [2]string         // two rules rejected, without a line, only when both are there
	baseFails bool
	checks    int
	applied   []string // the scripts loaded with nft -f
}

func (n *fakeNft) Run(_ context.Context, stdin string, args ...string) (string, error) {
	var stderr strings.Builder
	present := map[string]bool{}
	for i, line := range strings.Split(stdin, "\n") {
		spec, err := parseRenderedRule(line)
		if err != nil {
			continue
		}
		present[spec.Name] = true
		if msg, ok := n.located[spec.Name]; ok {
			fmt.Fprintf(&stderr, "/dev/stdin:%d:3-20: Error: %s\n%s\n  ^^^^\n", i+1, msg, line)
		}
		if msg, ok := n.unlocated[spec.Name]; ok {
			fmt.Fprintf(&stderr, "Error: %s\n", msg)
		}
	}
	if n.together[0] != "" && present[n.together[0]] && present[n.together[1]] {
		stderr.WriteString("Error: Could not process rule: too many\n")
	}
	if n.baseFails {
		stderr.WriteString("/dev/stdin:6:3-50: Error: Could not process rule: No such file or directory\n")
	}
	if stderr.Len() > 0 {
		return "", &nftError{args: args, stderr: stderr.String()}
	}
	if args[0] == "-c" {
		n.checks++
	} else {
		n.applied = append(n.applied, stdin)
	}
	return "", nil
}

// desiredOf is a desired set as Sync gets it.
func desiredOf(specs ...RuleSpec) iter.Seq2[*Rule, statedb.Revision] {
	return func(yield func(*Rule, statedb.Revision) bool) {
		for i, s := range specs {
			if !yield(&Rule{RuleSpec: s}, statedb.Revision(i+1)) {
				return
			}
		}
	}
}

// appliedNames returns the names of the rules in the last script loaded.
func (n *fakeNft) appliedNames(t *testing.T) []string {
	t.Helper()
	if len(n.applied) == 0 {
		t.Fatal("nothing applied")
	}
	rs := ruleset{text: n.applied[len(n.applied)-1]}
	var names []string
	for _, line := range strings.Split(rs.text, "\n") {
		if spec, err := parseRenderedRule(line); err == nil {
			names = append(names, spec.Name)
		}
	}
	return names
}

// failed formats failures as "name: error" lines, in order.
func failed(failures []reconciler.ObjectFailure[*Rule]) string {
	var b strings.Builder
	for _, f := range failures {
		fmt.Fprintf(&b, "%s: %v (permanent %v)\n", f.Object.Name, f.Err, reconciler.IsPermanent(f.Err))
	}
	return b.String()
}

func TestApplyFailsRulesAlone(t *testing.T) {
	nft := &fakeNft{
		located:   map[string]string{"long": "comment too long, 128 characters maximum allowed"},
		unlocated: map[string]string{"odd": "Could not process rule: Invalid argument"},
	}
	fw := &firewall{nft: nft, policy: "drop", log: slog.New(slog.DiscardHandler)}
	failures, err := fw.apply(t.Context(), desiredOf(
		RuleSpec{Name: "a", Protocol: "tcp", Port: 22},
		RuleSpec{Name: "badport", Protocol: "tcp", Port: 70000},
		RuleSpec{Name: "long", Protocol: "tcp", Port: 80},
		RuleSpec{Name: "odd", Protocol: "udp", Port: 53},
		RuleSpec{Name: "z", Protocol: "udp", Port: 123},
	))
	if err != nil {
		t.Fatal(err)
	}
	want := "badport: invalid rule: badport: port 70000: want 1 to 65535 (permanent true)\n" +
		"long: nft rejects rule long: comment too long, 128 characters maximum allowed (permanent true)\n" +
		"odd: nft rejects rule odd: Could not process rule: Invalid argument (permanent true)\n"
	if got := failed(failures); got != want {
		t.Fatalf("failures:\n%swant:\n%s", got, want)
	}
	if got := nft.appliedNames(t); fmt.Sprint(got) != "[a z]" {
		t.Fatalf("applied %v, want [a z]", got)
	}
	// Checks that passed: the base and each rule but odd on its own (the
	// fallback for odd's error, which has no line), then the rest.
	if nft.checks != 1+2+1 {
		t.Fatalf("%d checks passed, want 4", nft.checks)
	}
}

func TestApplyWholeFailures(t *testing.T) {
	specs := []RuleSpec{
		{Name: "a", Protocol: "tcp", Port: 22},
		{Name: "b", Protocol: "tcp", Port: 23},
		{Name: "c", Protocol: "tcp", Port: 24},
	}
	for _, c := range []struct {
		name string
		nft  *fakeNft
		want string
	}{
		{"base rejected", &fakeNft{baseFails: true}, "check the base ruleset: nft -c -f -: /dev/stdin:6:3-50: Error: Could not process rule"},
		{"rules rejected only together", &fakeNft{together: [2]string{"a", "c"}}, "nft rejects it, but no rule on its own: nft -c -f -: Error: Could not process rule: too many"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fw := &firewall{nft: c.nft, policy: "drop", log: slog.New(slog.DiscardHandler)}
			failures, err := fw.apply(t.Context(), desiredOf(specs...))
			if err == nil || !strings.Contains(err.Error(), c.want) || failures != nil {
				t.Fatalf("got %v, %v; want an error containing %q", failed(failures), err, c.want)
			}
			if len(c.nft.applied) != 0 {
				t.Fatalf("applied %d scripts, want none", len(c.nft.applied))
			}
		})
	}
}

func TestLocate(t *testing.T) {
	a, b := &Rule{RuleSpec: RuleSpec{Name: "a"}}, &Rule{RuleSpec: RuleSpec{Name: "b"}}
	rs := ruleset{lines: map[int]*Rule{9: a, 10: b}}
	// nft's own output, for two rules, one with two errors, and one for
	// a line of the base ruleset.
	stderr := `/dev/stdin:10:31-201: Error: comment too long, 128 characters maximum allowed
		tcp dport 80 accept comment "xxx"
		                            ^^^^^
/dev/stdin:9:13-21: Error: Range has zero or negative size
		udp dport 9000-8000 accept comment "rev"
		          ^^^^^^^^^
/dev/stdin:9:1-10:4: Error: spans two lines
/dev/stdin:6:3-50: Error: Could not process rule: No such file or directory
`
	bad := rs.locate(&nftError{args: []string{"-c"}, stderr: stderr})
	if len(bad) != 2 || bad[a] != "Range has zero or negative size; spans two lines" ||
		bad[b] != "comment too long, 128 characters maximum allowed" {
		t.Fatalf("located %v", bad)
	}
	if bad := rs.locate(fmt.Errorf("exec: nft: not found")); len(bad) != 0 {
		t.Fatalf("located %v in an error that is not nft's", bad)
	}
}

// FuzzLocate checks that reading nft's error output never panics, finds
// only rules of the ruleset, and keeps messages to one line each.
func FuzzLocate(f *testing.F) {
	f.Add("/dev/stdin:9:13-21: Error: Range has zero or negative size\n\t\tudp dport 9000-8000\n\t\t          ^^^^\n")
	f.Add("/dev/stdin:10:1-9:4: Error: x\n/dev/stdin:99999999999999999999:1-2: Error: y\n")
	f.Add("Error: Could not process rule: Invalid argument\n")
	f.Add(":9:1-1: Error: \n")
	f.Add("")
	a, b := &Rule{RuleSpec: RuleSpec{Name: "a"}}, &Rule{RuleSpec: RuleSpec{Name: "b"}}
	rs := ruleset{lines: map[int]*Rule{9: a, 10: b}}
	f.Fuzz(func(t *testing.T, stderr string) {
		err := &nftError{args: []string{"-c", "-f", "-"}, stderr: stderr}
		for r, msg := range rs.locate(err) {
			if r != a && r != b {
				t.Fatalf("located %v, not a rule of the ruleset", r)
			}
			if strings.Contains(msg, "\n") {
				t.Fatalf("message %q spans lines", msg)
			}
		}
		if msg := nftMessages(err); msg == "" && strings.TrimSpace(stderr) != "" && !strings.Contains(stderr, "Error:") {
			t.Fatalf("no message from %q", stderr)
		}
	})
}
