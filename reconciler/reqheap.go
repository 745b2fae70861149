package reconciler

// reqHeap is a binary min-heap that records each request's position, so
// any request can be removed in O(log n).
type reqHeap[Obj any] struct {
	items []*request[Obj]
	less  func(a, b *request[Obj]) bool
	idx   func(*request[Obj]) *int
}

func (h *reqHeap[Obj]) push(r *request[Obj]) {
	h.items = append(h.items, r)
	*h.idx(r) = len(h.items) - 1
	h.up(len(h.items) - 1)
}

func (h *reqHeap[Obj]) remove(i int) {
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = nil
	h.items = h.items[:last]
	if i < last && !h.down(i) {
		h.up(i)
	}
}

func (h *reqHeap[Obj]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*h.idx(h.items[i]) = i
	*h.idx(h.items[j]) = j
}

func (h *reqHeap[Obj]) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(h.items[i], h.items[parent]) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

// down sifts i down and reports whether it moved.
func (h *reqHeap[Obj]) down(i int) bool {
	start := i
	n := len(h.items)
	for {
		smallest := i
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c < n && h.less(h.items[c], h.items[smallest]) {
				smallest = c
			}
		}
		if smallest == i {
			return i != start
		}
		h.swap(i, smallest)
		i = smallest
	}
}
