package heap

import (
	"math/rand/v2"
	"slices"
	"testing"
)

type item struct {
	v   int
	idx int
}

// TestIndexedAgainstSort pushes and removes random items and checks after
// each step that every item knows its position and the least comes first.
func TestIndexedAgainstSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := Indexed[*item]{
		Less:  func(a, b *item) bool { return a.v < b.v },
		Index: func(x *item) *int { return &x.idx },
	}
	var in []*item
	for step := range 5000 {
		if len(in) == 0 || rng.IntN(3) > 0 {
			x := &item{v: rng.IntN(100)}
			h.Push(x)
			in = append(in, x)
		} else {
			i := rng.IntN(len(in))
			x := in[i]
			h.Remove(x.idx)
			if x.idx != -1 {
				t.Fatalf("step %d: a removed item keeps position %d", step, x.idx)
			}
			in = slices.Delete(in, i, i+1)
		}
		for i, x := range h.Items {
			if x.idx != i {
				t.Fatalf("step %d: item at %d says %d", step, i, x.idx)
			}
		}
		if h.Len() != len(in) {
			t.Fatalf("step %d: %d items, want %d", step, h.Len(), len(in))
		}
		if len(in) > 0 {
			least := slices.MinFunc(in, func(a, b *item) int { return a.v - b.v })
			if h.Items[0].v != least.v {
				t.Fatalf("step %d: head %d, least %d", step, h.Items[0].v, least.v)
			}
		}
	}
}
