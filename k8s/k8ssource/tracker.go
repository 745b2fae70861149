package k8ssource

import (
	"maps"
	"slices"
	"sync"

	"github.com/cilium/statedb"
)

// itemState is what the status writer knows of one Kubernetes object
// beyond the table, from the source's Transform calls: the generation
// read last, why its Transform failed, the table objects its last
// successful Transform yielded (and those it yielded before and no
// longer does), the writer's fields as the object carries them, and its
// deletion (finalizer.go).
type itemState[T Object, Obj comparable] struct {
	gen     int64
	failed  bool
	failErr string
	// conflict is why it was refused table keys another object holds
	// (claims.go), "" when it was not.
	conflict string
	// yielded are the table objects of the last successful Transform,
	// of generation yieldedGen. Once the writer finds one in the table
	// it holds the table's object instead (own), so that the tracker
	// keeps no copy of its own.
	yielded    []Obj
	yieldedGen int64
	// retired are the objects an earlier Transform yielded that the
	// last one does not: the writer waits for them to leave the table,
	// and, with explainers, for their Deletes to succeed.
	retired []retiredRow[Obj]
	seen    observed
	// deleting: the object has a deletionTimestamp; finalized: it
	// carries the source's finalizer. phase is where its cleanup is, and
	// obj the object itself while it is being deleted with the
	// finalizer (to read it again, see ListerWatcher.reemit).
	deleting, finalized bool
	phase               cleanupPhase
	obj                 T
	// rv is the resourceVersion read last: the finalizer's patches are
	// made on that version only, so that they never create an object
	// deleted meanwhile.
	rv string
}

// retiredRow is an object no longer yielded, and the revision of a read
// of the table that no longer held it (0 until one has been seen): its
// Delete has succeeded for a reconciler once the reconciler has read
// past it and holds nothing for the key.
type retiredRow[Obj comparable] struct {
	obj    Obj
	goneAt statedb.Revision
}

// tracker records, from the source's Transform calls (one per object
// version the source reads) and its lists and deletes, the state of each
// Kubernetes object, and tells the status writer which keys changed.
// Transform runs concurrently during a list: everything is under mu.
type tracker[T Object, Obj comparable] struct {
	observe func(T) observed
	// finalizer is the source's finalizer ("" without one).
	finalizer string
	// samePK reports whether two table objects have the same primary
	// key; equal whether they have the same content (Source.Equal).
	samePK func(a, b Obj) bool
	equal  func(a, b Obj) bool
	// pkOf is an object's primary key; claims decide which object holds
	// a key several ask for, and reemit reads again one that holds it
	// now (set once the ListerWatcher exists).
	pkOf   func(o Obj) string
	claims *claims[T]
	reemit func(key string, obj T)
	// firstList are the keys of the first list not read yet (nil
	// before it and once all are): the claims settle once it is read.
	firstList map[string]struct{}
	firstRead bool

	mu     sync.Mutex
	items  map[string]*itemState[T, Obj]
	dirty  map[string]struct{}
	notify chan struct{}
}

func newTracker[T Object, Obj comparable](observe func(T) observed, table statedb.Table[Obj], equal func(a, b Obj) bool) *tracker[T, Obj] {
	idx := table.PrimaryIndexer()
	return &tracker[T, Obj]{
		observe: observe,
		samePK: func(a, b Obj) bool {
			ka, oka := idx.ObjectToKey(a)
			kb, okb := idx.ObjectToKey(b)
			return oka && okb && string(ka) == string(kb)
		},
		pkOf: func(o Obj) string {
			k, _ := idx.ObjectToKey(o)
			return string(k)
		},
		claims: newClaims[T](),
		equal:  equal,
		items:  map[string]*itemState[T, Obj]{},
		dirty:  map[string]struct{}{},
		notify: make(chan struct{}, 1),
	}
}

// transformed records the outcome of Transform for the object of key:
// objs it yielded, or err. It returns the objects the object may have:
// objs without those whose keys another object holds (claims.go).
func (t *tracker[T, Obj]) transformed(key string, obj T, objs []Obj, err error) []Obj {
	seen := t.observe(obj)
	var failErr, conflict string
	if err != nil {
		// Outside the mutex: the writer's loop takes it too.
		failErr = sanitize(err.Error())
	} else {
		objs, conflict = t.claim(key, obj, seen, objs)
	}
	t.mu.Lock()
	st := t.items[key]
	if st == nil {
		st = &itemState[T, Obj]{}
		t.items[key] = st
	}
	st.gen, st.seen, st.rv = obj.GetGeneration(), seen, obj.GetResourceVersion()
	st.deleting = obj.GetDeletionTimestamp() != nil
	st.finalized = t.finalizer != "" && slices.Contains(obj.GetFinalizers(), t.finalizer)
	if st.deleting && st.finalized {
		st.obj = obj
	}
	if err != nil {
		st.failed, st.failErr = true, failErr
	} else {
		st.failed, st.failErr, st.conflict = false, "", conflict
		st.retire(objs, t.samePK)
		// A copy: the source goes on with objs, and own swaps entries.
		st.yielded, st.yieldedGen = slices.Clone(objs), st.gen
	}
	t.markLocked(key)
	first := t.readLocked(key)
	t.mu.Unlock()
	if first {
		t.readAgain(t.claims.setListed())
	}
	return objs
}

// readLocked records that key was read (or deleted), and reports whether
// that completes the reading of the first list.
func (t *tracker[T, Obj]) readLocked(key string) bool {
	if t.firstList == nil {
		return false
	}
	delete(t.firstList, key)
	if len(t.firstList) > 0 {
		return false
	}
	t.firstList, t.firstRead = nil, true
	return true
}

// retire moves to retired the objects st yields now that next does not,
// and forgets the retired ones next yields again.
func (st *itemState[T, Obj]) retire(next []Obj, samePK func(a, b Obj) bool) {
	in := func(o Obj, objs []Obj) bool {
		for _, n := range objs {
			if samePK(o, n) {
				return true
			}
		}
		return false
	}
	var kept []retiredRow[Obj]
	for _, r := range st.retired {
		if !in(r.obj, next) {
			kept = append(kept, r)
		}
	}
	for _, y := range st.yielded {
		if in(y, next) {
			continue
		}
		dup := false
		for _, k := range kept {
			dup = dup || samePK(k.obj, y)
		}
		if !dup {
			kept = append(kept, retiredRow[Obj]{obj: y})
		}
	}
	st.retired = kept
}

func (t *tracker[T, Obj]) markLocked(key string) {
	t.dirty[key] = struct{}{}
	select {
	case t.notify <- struct{}{}:
	default:
	}
}

// listed forgets the objects a complete list no longer has.
func (t *tracker[T, Obj]) listed(keys map[string]struct{}) {
	t.mu.Lock()
	var gone []string
	for k := range t.items {
		if _, ok := keys[k]; !ok {
			delete(t.items, k)
			t.markLocked(k)
			gone = append(gone, k)
		}
	}
	first := false
	switch {
	case t.firstRead:
	case t.firstList == nil:
		// The first list: the claims settle once every key of it has
		// been read (Transform runs after List returns).
		t.firstList = maps.Clone(keys)
		first = len(keys) == 0
		t.firstRead = first
	default:
		for k := range t.firstList {
			if _, ok := keys[k]; !ok {
				first = first || t.readLocked(k)
			}
		}
	}
	t.mu.Unlock()
	for _, k := range gone {
		t.readAgain(t.claims.release(k, ""))
	}
	if first {
		t.readAgain(t.claims.setListed())
	}
}

// deleted forgets a deleted object.
func (t *tracker[T, Obj]) deleted(key string) {
	t.mu.Lock()
	if _, ok := t.items[key]; ok {
		delete(t.items, key)
		t.markLocked(key)
	}
	first := t.readLocked(key)
	t.mu.Unlock()
	t.readAgain(t.claims.release(key, ""))
	if first {
		t.readAgain(t.claims.setListed())
	}
}

// snapshot returns a copy of the state of key, and false when the
// object is unknown (deleted, or not read yet).
func (t *tracker[T, Obj]) snapshot(key string) (itemState[T, Obj], bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.items[key]
	if st == nil {
		return itemState[T, Obj]{}, false
	}
	c := *st
	c.yielded = slices.Clone(st.yielded)
	c.retired = slices.Clone(st.retired)
	return c, true
}

// own records that the table holds row as the i-th object key yields,
// unless a newer Transform replaced it meanwhile.
func (t *tracker[T, Obj]) own(key string, i int, was, row Obj) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st := t.items[key]; st != nil && i < len(st.yielded) && st.yielded[i] == was {
		st.yielded[i] = row
	}
}

// gone records that a read of the table at rev no longer held the
// retired objects objs of key; with forget, they are forgotten.
func (t *tracker[T, Obj]) gone(key string, objs []Obj, rev statedb.Revision, forget bool) {
	var released []string
	defer func() {
		// Its claims on the keys forgotten end: another object that
		// asks for one holds it now.
		for _, pk := range released {
			t.readAgain(t.claims.release(key, pk))
		}
	}()
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.items[key]
	if st == nil {
		return
	}
	var kept []retiredRow[Obj]
	for _, r := range st.retired {
		if containsObj(objs, r.obj) {
			if forget {
				released = append(released, t.pkOf(r.obj))
				continue
			}
			if r.goneAt == 0 {
				r.goneAt = rev
			}
		}
		kept = append(kept, r)
	}
	st.retired = kept
}

func containsObj[Obj comparable](objs []Obj, o Obj) bool {
	for _, x := range objs {
		if x == o {
			return true
		}
	}
	return false
}

// rowDeleted records that the table deleted the retired object of key
// with obj's primary key at rev.
func (t *tracker[T, Obj]) rowDeleted(key string, obj Obj, rev statedb.Revision) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.items[key]
	if st == nil {
		return
	}
	for i, r := range st.retired {
		if r.goneAt == 0 && t.samePK(r.obj, obj) {
			st.retired[i].goneAt = rev
		}
	}
}

// confirmed forgets the retired objects of key whose Deletes every
// explainer reported as succeeded.
func (t *tracker[T, Obj]) confirmed(key string, objs []Obj) {
	t.gone(key, objs, 0, true)
}

// mark has the writer look at key again.
func (t *tracker[T, Obj]) mark(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.markLocked(key)
}

// keys returns every key the tracker knows.
func (t *tracker[T, Obj]) keys() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.items))
	for k := range t.items {
		out = append(out, k)
	}
	return out
}

// takeDirty returns the keys changed since the last call.
func (t *tracker[T, Obj]) takeDirty() map[string]struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.dirty) == 0 {
		return nil
	}
	d := t.dirty
	t.dirty = map[string]struct{}{}
	return d
}
