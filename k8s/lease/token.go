package lease

import (
	"context"
	"fmt"
)

// Token is the fencing value of a term: the Lease, its holder, and its
// leaderTransitions when this replica took it. Transitions grows by one
// each time the Lease changes hands, so of two terms of one Lease the
// later has the higher; a target that keeps the highest token it has
// accepted refuses the writes of an older term.
type Token struct {
	Lease       string // namespace/name
	Holder      string
	Transitions int32
}

// Less reports whether t is of an older term than o of the same Lease.
func (t Token) Less(o Token) bool { return t.Transitions < o.Transitions }

// String is "namespace/name@transitions (holder)".
func (t Token) String() string { return fmt.Sprintf("%s@%d (%s)", t.Lease, t.Transitions, t.Holder) }

type tokenKey struct{}

// TokenFrom returns the fencing Token an operation context carries:
// Acquire puts it there.
func TokenFrom(ctx context.Context) (Token, bool) {
	t, ok := ctx.Value(tokenKey{}).(Token)
	return t, ok
}
