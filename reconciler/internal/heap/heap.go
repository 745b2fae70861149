// Package heap is a binary min-heap whose items know their position, so
// that any item, not only the least, can be removed in O(log n): the
// reconciler's retry and refresh queues remove a key's entry when a newer
// change replaces it.
package heap

// Indexed is the heap. Less orders the items; Index returns where an item
// keeps its position, which the heap maintains (-1 once removed).
type Indexed[T any] struct {
	Items []T
	Less  func(a, b T) bool
	Index func(T) *int
}

// Len is the number of items.
func (h *Indexed[T]) Len() int { return len(h.Items) }

// Push adds x.
func (h *Indexed[T]) Push(x T) {
	h.Items = append(h.Items, x)
	*h.Index(x) = len(h.Items) - 1
	h.up(len(h.Items) - 1)
}

// Remove takes out the item at position i.
func (h *Indexed[T]) Remove(i int) {
	last := len(h.Items) - 1
	if i != last {
		h.swap(i, last)
	}
	*h.Index(h.Items[last]) = -1
	var zero T
	h.Items[last] = zero
	h.Items = h.Items[:last]
	if i < last && !h.down(i) {
		h.up(i)
	}
}

func (h *Indexed[T]) swap(i, j int) {
	h.Items[i], h.Items[j] = h.Items[j], h.Items[i]
	*h.Index(h.Items[i]) = i
	*h.Index(h.Items[j]) = j
}

func (h *Indexed[T]) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.Less(h.Items[i], h.Items[parent]) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

// down sifts i down and reports whether it moved.
func (h *Indexed[T]) down(i int) bool {
	start := i
	n := len(h.Items)
	for {
		least := i
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c < n && h.Less(h.Items[c], h.Items[least]) {
				least = c
			}
		}
		if least == i {
			return i != start
		}
		h.swap(i, least)
		i = least
	}
}
