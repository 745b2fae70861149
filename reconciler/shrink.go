package reconciler

// Giving back the room of a burst. A Go map keeps the room of the most
// it ever held: a startup backlog or a forest of Blocked keys, once
// reconciled, would keep its rows' room for the life of the agent. At the
// end of a step, when nothing walks them, the request table's maps that
// hold an eighth of their peak (of at least 4096 keys) are made anew, at
// a cost that follows what is left, once per burst.

// shrinkBelow is the least peak worth making a map anew for.
const shrinkBelow = 4096

// shrink makes rows, and the dependency graph's waiting lists, anew once
// they hold an eighth of their peak.
func (t *requests[Obj]) shrink() {
	if small(len(t.rows), t.rowsPeak) {
		t.rows, t.rowsPeak = remade(t.rows), len(t.rows)
	}
	if g := t.deps; g != nil && small(len(g.waiting), g.waitPeak) {
		g.waiting, g.waitPeak = remade(g.waiting), len(g.waiting)
	}
}

// small reports whether a map of n keys, of peak peak, is worth making
// anew.
func small(n, peak int) bool { return peak >= shrinkBelow && n <= peak/8 }

// remade is a new map with m's entries, and room for them only.
func remade[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
