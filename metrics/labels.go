package metrics

import (
	"slices"

	"github.com/converge-go/converge/reconciler"
)

// ops and results are the label values every reconciler's series are
// created for, copied once so that nobody changing reconciler.Ops later can
// make an index out of range.
var (
	ops     = slices.Clone(reconciler.Ops)
	results = slices.Clone(reconciler.Results)
)

// opIndex returns op's position in ops, or -1. A linear scan over a handful
// of short strings: cheaper than a map lookup, and it allocates nothing.
func opIndex(op reconciler.Op) int {
	for i, o := range ops {
		if o == op {
			return i
		}
	}
	return -1
}

// resultIndex returns result's position in results, or -1.
func resultIndex(r reconciler.Result) int {
	for i, x := range results {
		if x == r {
			return i
		}
	}
	return -1
}

// opResultIndex returns the index of (op, result) in a flattened
// [len(ops)][len(results)] array, or -1 when either is unknown (a
// reconciler newer than this package; the call is then not recorded).
func opResultIndex(op reconciler.Op, r reconciler.Result) (opIdx, opResIdx int) {
	oi, ri := opIndex(op), resultIndex(r)
	if oi < 0 || ri < 0 {
		return -1, -1
	}
	return oi, oi*len(results) + ri
}

// idKey is how a reconciler is named in expvar: its display name,
// "module_id" or "module_id/name".
func idKey(id reconciler.ReconcilerID) string { return id.DisplayName() }
