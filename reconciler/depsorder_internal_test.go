package reconciler

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
)

// TestDepOrderDependenciesFirst: on random graphs (cycles included), the
// order yields every object once, and every object after the objects it
// depends on, unless they are on a cycle with it.
func TestDepOrderDependenciesFirst(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 0))
		n := 1 + rng.IntN(40)
		deps := make([][]int, n)
		for i := range deps {
			for range rng.IntN(4) {
				deps[i] = append(deps[i], rng.IntN(n+5)) // some outside the set
			}
		}
		key := func(i int) string { return fmt.Sprintf("k%02d", i) }
		objs := func(yield func(int, statedb.Revision) bool) {
			for i := range n {
				if !yield(i, statedb.Revision(i+1)) {
					return
				}
			}
		}
		dependsOn := func(i int) []index.Key {
			var ks []index.Key
			for _, d := range deps[i] {
				ks = append(ks, index.Key(key(d)))
			}
			return ks
		}
		reach := func(from, to int) bool { return reaches(deps, from, to) }
		pos := map[int]int{}
		for i, rev := range depOrder(objs, key, dependsOn) {
			if _, dup := pos[i]; dup {
				t.Fatalf("seed %d: %d yielded twice", seed, i)
			}
			if rev != statedb.Revision(i+1) {
				t.Fatalf("seed %d: %d yielded with revision %d", seed, i, rev)
			}
			pos[i] = len(pos)
		}
		if len(pos) != n {
			t.Fatalf("seed %d: %d of %d yielded", seed, len(pos), n)
		}
		for i := range n {
			for _, d := range deps[i] {
				if d < n && d != i && pos[d] > pos[i] && !reach(d, i) {
					t.Fatalf("seed %d: %d yielded before its dependency %d (no cycle between them)", seed, i, d)
				}
			}
		}
	}
}

// TestDepOrderStops: a consumer that stops early stops the walk.
func TestDepOrderStops(t *testing.T) {
	objs := func(yield func(string, statedb.Revision) bool) {
		for _, k := range []string{"c", "b", "a"} {
			if !yield(k, 1) {
				return
			}
		}
	}
	dependsOn := func(k string) []index.Key {
		return map[string][]index.Key{"c": {index.Key("b")}, "b": {index.Key("a")}}[k]
	}
	var got []string
	for k := range depOrder(objs, func(s string) string { return s }, dependsOn) {
		got = append(got, k)
		if len(got) == 2 {
			break
		}
	}
	if fmt.Sprint(got) != "[a b]" {
		t.Fatalf("got %v, want [a b]", got)
	}
}

// reaches reports whether to is reachable from from along deps (indexes
// past the graph are outside the set).
func reaches(deps [][]int, from, to int) bool {
	seen := map[int]bool{}
	stack := []int{from}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, d := range deps[x] {
			if d >= len(deps) || seen[d] {
				continue
			}
			if d == to {
				return true
			}
			seen[d] = true
			stack = append(stack, d)
		}
	}
	return false
}
