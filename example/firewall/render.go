package main

import (
	"strings"
)

// The nftables table this program owns, and the only one it touches.
const (
	tableFamily = "inet"
	tableName   = "converge_firewall"
	chainName   = "input"
)

// ruleset is a rendered ruleset, for nft -f, and which rule is on which
// line of it, to tell which rule nft complains about.
type ruleset struct {
	text  string
	lines map[int]*Rule // 1-based line number -> the rule rendered on it
}

// render writes the whole ruleset of the valid rules (RuleSpec.Validate),
// in the order given, as one nft script that replaces the table
// atomically: nft applies a script in one transaction, and the script
// creates the table (a no-op when it exists), deletes it with everything
// in it, and declares it anew. Whatever was in the table before,
// including changes made behind the program's back, is gone, and no
// packet ever sees a half-applied ruleset. Other tables are not touched.
//
// The input chain drops (or accepts, by policy) what no rule accepts;
// loopback and replies to connections made from inside are always let in.
func render(policy string, rules []*Rule) ruleset {
	var b strings.Builder
	line := 0
	emit := func(parts ...string) {
		for _, p := range parts {
			b.WriteString(p)
		}
		b.WriteByte('\n')
		line++
	}
	table := tableFamily + " " + tableName
	emit("table ", table, " {")
	emit("}")
	emit("delete table ", table)
	emit("table ", table, " {")
	emit("\tchain ", chainName, " {")
	emit("\t\ttype filter hook input priority filter; policy ", policy, ";")
	emit("\t\tiif \"lo\" accept")
	emit("\t\tct state established,related accept")
	rs := ruleset{lines: make(map[int]*Rule, len(rules))}
	for _, r := range rules {
		emit("\t\t", r.Protocol, " dport ", r.ports(), " accept comment \"", ruleComment(r.RuleSpec), "\"")
		rs.lines[line] = r
	}
	emit("\t}")
	emit("}")
	rs.text = b.String()
	return rs
}

// ruleComment is the comment of a rule in the ruleset: its name, then its
// own comment after ": ". A name has no ':' or space, so the split back is
// unambiguous; it is how a listing of the table is read back.
func ruleComment(s RuleSpec) string {
	if s.Comment == "" {
		return s.Name
	}
	return s.Name + ": " + s.Comment
}
