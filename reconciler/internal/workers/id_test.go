package workers

import (
	"context"
	"sync"
	"testing"
)

// TestWorkerID: a task's context names the worker that runs it, from 1
// to at most the pool's size when no worker left it; off a worker the ID
// is 0.
func TestWorkerID(t *testing.T) {
	if id := ID(context.Background()); id != 0 {
		t.Fatalf("ID off a worker = %d, want 0", id)
	}
	var mu sync.Mutex
	seen := map[int]bool{}
	run := func(ctx context.Context, tk *task, _ func(), out []result) []result {
		mu.Lock()
		seen[ID(ctx)] = true
		mu.Unlock()
		return append(out, result{id: tk.id})
	}
	p := New(3, 100, run, func(tk *task) []result { return nil })
	defer closeNow(p)
	var tasks []task
	for i := range 30 {
		tasks = append(tasks, task{id: i})
	}
	p.Submit(context.Background(), tasks...)
	take(t, p, 30)
	mu.Lock()
	defer mu.Unlock()
	for id := range seen {
		if id < 1 || id > 3 {
			t.Errorf("worker ID %d, want 1 to 3", id)
		}
	}
	if len(seen) == 0 {
		t.Error("no worker ID seen")
	}
}
