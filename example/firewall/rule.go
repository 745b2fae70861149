package main

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"

	convergeindex "github.com/converge-go/converge/index"
	"github.com/converge-go/converge/reconciler"
)

// RuleSpec is what a user asks for: let packets of one protocol to a port,
// or a range of ports, in. It is what PUT takes (the name from the URL).
//
// The fields are plain ints and strings, not narrower types, on purpose:
// the table may be written by other code than the API (another cell of a
// larger agent), so the reconciler must cope with an object that is not
// valid, and report it on that object alone.
type RuleSpec struct {
	Name     string `json:"name"`
	Protocol string `json:"protocol"`           // "tcp" or "udp"
	Port     int    `json:"port"`               // 1-65535
	EndPort  int    `json:"end_port,omitempty"` // 0: Port alone; else the last port of the range
	Comment  string `json:"comment,omitempty"`
}

// Rule is one row of the desired-rules table: a RuleSpec and the status of
// its reconciliation. Objects in a statedb table are immutable: change a
// clone (Clone) and insert that.
type Rule struct {
	RuleSpec
	Status reconciler.Status `json:"status"`
}

// Clone returns a shallow copy of r; the reconciler clones with it before
// setting a status.
func (r *Rule) Clone() *Rule {
	c := *r
	return &c
}

// getStatus and setStatus are the reconciler's view of the status field.
func getStatus(r *Rule) reconciler.Status { return r.Status }

func setStatus(r *Rule, s reconciler.Status) *Rule {
	r.Status = s // r is already a clone
	return r
}

// TableHeader and TableRow make the table printable by statedb's "db/show"
// script command ("go run ./example/firewall shell db/show desired-rules").
func (r *Rule) TableHeader() []string {
	return []string{"Name", "Protocol", "Ports", "Comment", "Status"}
}

// TableRow implements statedb.TableWritable.
func (r *Rule) TableRow() []string {
	return []string{r.Name, r.Protocol, r.ports(), r.Comment, r.Status.Row()}
}

// ports is the port or range as nft writes it: "22" or "8000-8099".
func (s RuleSpec) ports() string {
	if s.EndPort == 0 {
		return strconv.Itoa(s.Port)
	}
	return strconv.Itoa(s.Port) + "-" + strconv.Itoa(s.EndPort)
}

// rulesTableName is the table's name in the database and in db/show.
const rulesTableName = "desired-rules"

// nameIndex is the primary index: one rule per name. Iterating the table
// goes in name order, so the rendered ruleset is the same for the same set.
var nameIndex = statedb.Index[*Rule, string]{
	Name: "name",
	FromObject: func(r *Rule) index.KeySet {
		return index.NewKeySet(index.String(r.Name))
	},
	FromKey:    index.String,
	FromString: index.FromString,
	Unique:     true,
}

// statusIndex finds rules by the kind of their status, for example every
// rule in Error. reconciler.WaitForReconciliation uses it too.
var statusIndex = convergeindex.NewStatusIndex("status", getStatus)

// newRulesTable registers the desired-rules table with the database.
func newRulesTable(db *statedb.DB) (statedb.RWTable[*Rule], error) {
	return statedb.NewTable(db, rulesTableName, nameIndex, statusIndex)
}

// errInvalidRule is wrapped by every error of Validate: the API answers it
// with 400 Bad Request, the reconciler fails that rule alone.
var errInvalidRule = errors.New("invalid rule")

// validName is what a rule may be called. The name is written into the
// ruleset inside a quoted comment, and a comment in nft cannot hold a
// double quote (there is no escape), so names keep to a safe alphabet.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// MaxCommentSize bounds a comment in bytes, to keep the table small. nft
// has its own, lower limit (128 bytes for the whole comment, the rule's
// name included, in nftables 1.0): that one is nft's to enforce, and a rule
// it rejects fails alone (see locate.go).
const MaxCommentSize = 256

// Validate checks what rendering a rule needs: a safe name, a protocol the
// renderer knows, ports in range, and a comment that cannot break out of
// its quotes. What only nft knows (its own limits) is left to nft. It
// returns an error wrapping errInvalidRule that says what is wrong.
func (s RuleSpec) Validate() error {
	switch {
	case !validName.MatchString(s.Name):
		return fmt.Errorf("%w: name %q: want 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit",
			errInvalidRule, s.Name)
	case s.Protocol != "tcp" && s.Protocol != "udp":
		return fmt.Errorf("%w: %s: protocol %q: want \"tcp\" or \"udp\"", errInvalidRule, s.Name, s.Protocol)
	case s.Port < 1 || s.Port > 65535:
		return fmt.Errorf("%w: %s: port %d: want 1 to 65535", errInvalidRule, s.Name, s.Port)
	case s.EndPort != 0 && (s.EndPort <= s.Port || s.EndPort > 65535):
		return fmt.Errorf("%w: %s: end_port %d: want a port above port (%d) and at most 65535, or none",
			errInvalidRule, s.Name, s.EndPort, s.Port)
	}
	return validateComment(s.Name, s.Comment)
}

// validateComment accepts printable UTF-8 without double quotes: the
// renderer writes the comment between double quotes on one line, and nft
// has no escapes inside quotes.
func validateComment(name, c string) error {
	if len(c) > MaxCommentSize {
		return fmt.Errorf("%w: %s: comment of %d bytes: the limit is %d", errInvalidRule, name, len(c), MaxCommentSize)
	}
	if !utf8.ValidString(c) {
		return fmt.Errorf("%w: %s: comment is not valid UTF-8", errInvalidRule, name)
	}
	for _, r := range c {
		if r == '"' || !unicode.IsPrint(r) {
			return fmt.Errorf("%w: %s: comment: %q is not allowed (no double quotes or control characters)",
				errInvalidRule, name, r)
		}
	}
	return nil
}
