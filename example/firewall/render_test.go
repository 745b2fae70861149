package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The grammar of what render writes, line by line, strict: a parser-level
// check that stands in for nft where nft is not at hand, and that the fuzz
// test holds every valid input to.
var (
	renderedHeader = []string{
		"table inet converge_firewall {",
		"}",
		"delete table inet converge_firewall",
		"table inet converge_firewall {",
		"\tchain input {",
		"", // the policy line, matched by renderedPolicy
		"\t\tiif \"lo\" accept",
		"\t\tct state established,related accept",
	}
	renderedPolicy = regexp.MustCompile(`^\t\ttype filter hook input priority filter; policy (drop|accept);$`)
	// A rule: the comment is one quoted string with no quote or control
	// character in it, so it cannot end early or run into the next line.
	renderedRule = regexp.MustCompile(`^\t\t(tcp|udp) dport ([1-9][0-9]*)(?:-([1-9][0-9]*))? accept comment "([^"\x00-\x1f\x7f]*)"$`)
)

// parseRendered parses a ruleset render wrote back into its policy and
// rules, and checks that the lines map of rs names each rule's line. It
// fails on anything render should never write.
func parseRendered(rs ruleset) (policy string, specs []RuleSpec, err error) {
	text, ok := strings.CutSuffix(rs.text, "\n")
	if !ok {
		return "", nil, fmt.Errorf("no final newline")
	}
	lines := strings.Split(text, "\n")
	if len(lines) < len(renderedHeader)+2 {
		return "", nil, fmt.Errorf("%d lines", len(lines))
	}
	for i, want := range renderedHeader {
		if want == "" {
			m := renderedPolicy.FindStringSubmatch(lines[i])
			if m == nil {
				return "", nil, fmt.Errorf("line %d: %q is not the chain's declaration", i+1, lines[i])
			}
			policy = m[1]
		} else if lines[i] != want {
			return "", nil, fmt.Errorf("line %d: %q, want %q", i+1, lines[i], want)
		}
	}
	if tail := lines[len(lines)-2:]; tail[0] != "\t}" || tail[1] != "}" {
		return "", nil, fmt.Errorf("ends with %q, want the chain and table closed", tail)
	}
	body := lines[len(renderedHeader) : len(lines)-2]
	if len(rs.lines) != len(body) {
		return "", nil, fmt.Errorf("%d rule lines, %d in the lines map", len(body), len(rs.lines))
	}
	for i, line := range body {
		spec, err := parseRenderedRule(line)
		if err != nil {
			return "", nil, fmt.Errorf("line %d: %w", len(renderedHeader)+i+1, err)
		}
		if r := rs.lines[len(renderedHeader)+i+1]; r == nil || r.RuleSpec != spec {
			return "", nil, fmt.Errorf("line %d holds %+v, the lines map says %+v", len(renderedHeader)+i+1, spec, r)
		}
		specs = append(specs, spec)
	}
	return policy, specs, nil
}

func parseRenderedRule(line string) (RuleSpec, error) {
	m := renderedRule.FindStringSubmatch(line)
	if m == nil {
		return RuleSpec{}, fmt.Errorf("%q is not a rule", line)
	}
	spec := RuleSpec{Protocol: m[1]}
	spec.Port, _ = strconv.Atoi(m[2])
	if m[3] != "" {
		spec.EndPort, _ = strconv.Atoi(m[3])
	}
	spec.Name, spec.Comment, _ = strings.Cut(m[4], ": ")
	return spec, nil
}

func TestRender(t *testing.T) {
	specs := []RuleSpec{
		{Name: "dns", Protocol: "udp", Port: 53},
		{Name: "ssh", Protocol: "tcp", Port: 22, Comment: "ssh: from anywhere"},
		{Name: "web", Protocol: "tcp", Port: 8000, EndPort: 8099, Comment: `it's ünï \ $x {}; # ok`},
	}
	var rules []*Rule
	for _, s := range specs {
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		rules = append(rules, &Rule{RuleSpec: s})
	}
	rs := render("drop", rules)
	policy, got, err := parseRendered(rs)
	if err != nil {
		t.Fatalf("%s\n%s", err, rs.text)
	}
	if policy != "drop" || fmt.Sprint(got) != fmt.Sprint(specs) {
		t.Fatalf("read back policy %q rules %+v, want drop %+v", policy, got, specs)
	}
	if want := "\t\ttcp dport 8000-8099 accept comment \"web: it's ünï \\ $x {}; # ok\"\n"; !strings.Contains(rs.text, want) {
		t.Fatalf("no line %q in\n%s", want, rs.text)
	}

	// No rules: the base ruleset alone, which still replaces the table.
	if policy, got, err := parseRendered(render("accept", nil)); err != nil || policy != "accept" || len(got) != 0 {
		t.Fatalf("empty: %q %v %v", policy, got, err)
	}
}

// FuzzRender checks that every rule Validate accepts renders into a
// ruleset that parses back to the same rule, beside another, and that
// nothing in a rule can break out of its line or its quotes.
func FuzzRender(f *testing.F) {
	f.Add("ssh", "tcp", 22, 0, "")
	f.Add("web", "tcp", 8000, 8099, "range")
	f.Add("q", "udp", 53, 0, `a "quoted" comment`)
	f.Add("nl", "udp", 53, 0, "line\nbreak")
	f.Add("x", "tcp", 1, 65535, `\`)
	f.Add("x", "tcp", 65535, 0, "\u2028 separator")
	f.Add("y", "tcp", 5, 0, "}\n\tchain evil {")
	f.Add("z; flush ruleset", "tcp", 5, 0, "")
	f.Add("a", "sctp", 0, -1, "\xff")
	f.Fuzz(func(t *testing.T, name, protocol string, port, endPort int, comment string) {
		spec := RuleSpec{Name: name, Protocol: protocol, Port: port, EndPort: endPort, Comment: comment}
		if err := spec.Validate(); err != nil {
			return
		}
		other := RuleSpec{Name: "other", Protocol: "udp", Port: 53}
		rs := render("drop", []*Rule{{RuleSpec: spec}, {RuleSpec: other}})
		_, got, err := parseRendered(rs)
		if err != nil {
			t.Fatalf("%+v: %s\n%s", spec, err, rs.text)
		}
		if len(got) != 2 || got[0] != spec || got[1] != other {
			t.Fatalf("%+v read back as %+v", spec, got)
		}
	})
}
