package k8ssource

import (
	"sync"
)

// itemState is what the status writer must know about one Kubernetes
// object beyond the table: why its Transform failed, and the Reconciled
// condition it carries now. Objects with neither have no entry, so a
// source without status (or before the first write) keeps nothing per
// object.
type itemState struct {
	failed  bool
	failErr string
	failGen int64
	seen    condition
	hasSeen bool
}

// tracker records, from the source's Transform calls (one per object
// version the source reads) and its lists and deletes, the state of each
// Kubernetes object, and tells the status writer which keys changed.
// Transform runs concurrently during a list: everything is under mu.
type tracker[T Object] struct {
	conditions func(T) (condition, bool)

	mu     sync.Mutex
	items  map[string]itemState
	dirty  map[string]struct{}
	notify chan struct{}
}

func newTracker[T Object](conditions func(T) (condition, bool)) *tracker[T] {
	return &tracker[T]{
		conditions: conditions,
		items:      map[string]itemState{},
		dirty:      map[string]struct{}{},
		notify:     make(chan struct{}, 1),
	}
}

// transformed records the outcome of Transform for the object of key.
func (t *tracker[T]) transformed(key string, obj T, err error) {
	var st itemState
	if err != nil {
		st.failed, st.failErr, st.failGen = true, truncate(err.Error()), obj.GetGeneration()
	}
	st.seen, st.hasSeen = t.conditions(obj)
	t.mu.Lock()
	defer t.mu.Unlock()
	old, had := t.items[key]
	if had == (st.failed || st.hasSeen) && old == st {
		return
	}
	if st.failed || st.hasSeen {
		t.items[key] = st
	} else {
		delete(t.items, key)
	}
	t.markLocked(key)
}

func (t *tracker[T]) markLocked(key string) {
	t.dirty[key] = struct{}{}
	select {
	case t.notify <- struct{}{}:
	default:
	}
}

// listed forgets the objects a complete list no longer has.
func (t *tracker[T]) listed(keys map[string]struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.items {
		if _, ok := keys[k]; !ok {
			delete(t.items, k)
		}
	}
}

// deleted forgets a deleted object.
func (t *tracker[T]) deleted(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.items, key)
}

// get returns the state of key.
func (t *tracker[T]) get(key string) itemState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.items[key]
}

// takeDirty returns the keys changed since the last call.
func (t *tracker[T]) takeDirty() map[string]struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.dirty) == 0 {
		return nil
	}
	d := t.dirty
	t.dirty = map[string]struct{}{}
	return d
}
