package reconciler

import "slices"

// The other keys a found cycle shows to be on one. The walk that finds a
// cycle as key is judged (cycleThrough) stops at the first; the edges
// key's object names may close others through key whose members that one
// does not take (key -> a -> key found, key -> b -> c -> key not). Every
// key of key's strongly connected component is on a cycle through key,
// and each is given one: two breadth-first searches from key over what
// key reaches, one along the dependencies and one against them, find for
// each member a way to key and a way back. Cycles are errors, and rare:
// this runs only as one is found, at a cost that follows what key
// reaches, and keeps per member only the keys its error names.

// depCycle is a cycle as its error names it: its first keys (all of
// them, or the first cycleShown+1) and how many keys it has.
type depCycle struct {
	keys []string
	n    int
}

// cycleShown is how many keys of a longer cycle its error names.
const cycleShown = 5

// way is the first keys (cycleShown+1 at most) of a shortest way from
// the key a search starts at (it first), and how many steps it takes.
type way struct {
	first []string
	steps int
}

// memberCycle is a key and a cycle through it.
type memberCycle struct {
	key   string
	cycle depCycle
}

// sccCycles returns a cycle for each key of key's strongly connected
// component but key and those on found (which have one already), each
// starting at its key, in the order they were found.
func (t *requests[Obj]) sccCycles(key string, found []string) []memberCycle {
	// Along the dependencies: a shortest way from key to each key it
	// reaches, and who names each.
	fwd := map[string]way{key: {first: []string{key}}}
	named := map[string][]string{}
	order := []string{key}
	for i := 0; i < len(order); i++ {
		n := order[i]
		out, ok := t.edges(n)
		if !ok {
			continue
		}
		for _, d := range out {
			named[d] = append(named[d], n)
			if _, seen := fwd[d]; !seen {
				w := fwd[n]
				if len(w.first) <= cycleShown {
					w.first = append(w.first[:len(w.first):len(w.first)], d)
				}
				w.steps++
				fwd[d] = w
				order = append(order, d)
			}
		}
	}
	// Against them, from key: the next key on a shortest way back to key,
	// and how many steps it takes. What it reaches is key's component.
	next := map[string]string{}
	back := map[string]int{key: 0}
	comp := []string{key}
	for i := 0; i < len(comp); i++ {
		n := comp[i]
		for _, p := range named[n] {
			if _, seen := back[p]; !seen {
				back[p], next[p] = back[n]+1, n
				comp = append(comp, p)
			}
		}
	}
	var cycles []memberCycle
	for _, m := range comp[1:] {
		if !slices.Contains(found, m) {
			cycles = append(cycles, memberCycle{m, joinCycle(m, key, next, back[m], fwd[m])})
		}
	}
	return cycles
}

// joinCycle is the cycle from m to key (along next, steps long) and on
// from key back to m (w).
func joinCycle(m, key string, next map[string]string, steps int, w way) depCycle {
	c := depCycle{n: steps + w.steps}
	shown := min(c.n, cycleShown+1)
	for k := m; k != key && len(c.keys) < shown; k = next[k] {
		c.keys = append(c.keys, k)
	}
	for _, k := range w.first {
		if len(c.keys) == shown {
			break
		}
		c.keys = append(c.keys, k)
	}
	return c
}
