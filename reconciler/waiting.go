package reconciler

import "github.com/converge-go/converge/reconciler/internal/heap"

// waitingHeaps are rows that wait outside active and the retry heaps
// (ordered mode's Queued rows, dependencies' Blocked rows) by askedAt,
// and those not attempted yet: what the waits' watermarks need of them
// (view), which active gives for the rows in it. Such a row is in no
// retry heap, so those positions are free for these.
type waitingHeaps[Obj any] struct {
	byAsk, untried heap.Indexed[*request[Obj]]
}

func (h *waitingHeaps[Obj]) init() {
	byAsk := func(a, b *request[Obj]) bool { return a.askedAt < b.askedAt }
	h.byAsk = heap.Indexed[*request[Obj]]{Less: byAsk, Index: func(r *request[Obj]) *int { return &r.askIdx }}
	h.untried = heap.Indexed[*request[Obj]]{Less: byAsk, Index: func(r *request[Obj]) *int { return &r.dueIdx }}
}

func (h *waitingHeaps[Obj]) push(r *request[Obj]) {
	h.byAsk.Push(r)
	if !r.tried {
		h.untried.Push(r)
	}
}

func (h *waitingHeaps[Obj]) remove(r *request[Obj]) {
	h.byAsk.Remove(r.askIdx)
	if !r.tried {
		h.untried.Remove(r.dueIdx)
	}
}

// view adds the rows to v: a change not attempted holds reconciled back,
// any holds the retry low watermark.
func (h *waitingHeaps[Obj]) view(v *tableView[Obj]) {
	if u := h.untried.Items; len(u) > 0 {
		v.reconciled = min(v.reconciled, u[0].askedAt-1)
	}
	if q := h.byAsk.Items; len(q) > 0 && (v.oldest == nil || q[0].askedAt < v.oldest.askedAt) {
		v.oldest = q[0]
	}
}
