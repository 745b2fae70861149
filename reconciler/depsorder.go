package reconciler

import (
	"iter"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
)

// depOrder returns objs in dependency order (Config.DependsOn): every
// object after the objects of the set it depends on, so that a Prune or
// a Sync can create in that order and remove the unexpected in reverse.
// Dependencies outside the set are not waited for; the objects of a
// cycle come in the order they were met. Keys not in a dependency
// relation keep the table's order. It holds the set in memory for the
// call: the cost of a full reconciliation with DependsOn, O(objects).
func depOrder[Obj any](objs iter.Seq2[Obj, statedb.Revision], keyOf func(Obj) string,
	dependsOn func(Obj) []index.Key) iter.Seq2[Obj, statedb.Revision] {
	return func(yield func(Obj, statedb.Revision) bool) {
		type entry struct {
			obj Obj
			rev statedb.Revision
		}
		var all []entry
		at := map[string]int32{}
		for obj, rev := range objs {
			at[keyOf(obj)] = int32(len(all))
			all = append(all, entry{obj, rev})
		}
		const (
			unseen = iota
			open   // on the walk's stack: a dependency met again closes a cycle
			out    // yielded
		)
		mark := make([]uint8, len(all))
		type frame struct {
			i    int32
			deps []index.Key
		}
		var stack []frame
		for root := range all {
			if mark[root] != unseen {
				continue
			}
			mark[root] = open
			stack = append(stack[:0], frame{int32(root), dependsOn(all[root].obj)})
			for len(stack) > 0 {
				top := &stack[len(stack)-1]
				if len(top.deps) > 0 {
					d := top.deps[0]
					top.deps = top.deps[1:]
					if j, ok := at[string(d)]; ok && mark[j] == unseen {
						mark[j] = open
						stack = append(stack, frame{j, dependsOn(all[j].obj)})
					}
					continue
				}
				mark[top.i] = out
				e := all[top.i]
				stack = stack[:len(stack)-1]
				if !yield(e.obj, e.rev) {
					return
				}
			}
		}
	}
}
