package k8ssource

import (
	"fmt"
	"slices"
	"sync"
)

// Two Kubernetes objects of one source may ask for one table object (one
// primary key): two DNSRecords for one name, two DesiredFiles for one
// path. The claims decide which one holds it; the others are refused on
// themselves (ReasonConflict), not only in the source's health:
//
//   - the first object to ask holds the key; a later one is refused,
//     its other table objects kept, and its condition names the holder;
//   - at start, an object that was refused before (its condition says
//     Conflict) holds no key until the first list is complete, and then
//     only one no other object asks for, so that a restart keeps the
//     holder;
//   - the holder keeps the key until its claim is cleaned up: once the
//     row it no longer yields has left the table (with a finalizer: once
//     its Delete succeeded), or once the object is gone. Then the object
//     that asked next holds it and is read again: its row is written
//     anew, after the holder's Delete.

// claimant is one object that asks for a key: obj is kept while it is
// refused, to be read again once it holds the key.
type claimant[T Object] struct {
	item    string
	obj     T
	refused bool // refused before: its condition was Conflict when read
	wants   bool // its last Transform yields the key
}

// claims are the claimants of each key, by primary key, the holder
// first, and the keys each object claims.
type claims[T Object] struct {
	mu     sync.Mutex
	keys   map[string][]claimant[T]
	byItem map[string][]string
	listed bool // a complete list was seen: a holder is never displaced
}

func newClaims[T Object]() *claims[T] {
	return &claims[T]{keys: map[string][]claimant[T]{}, byItem: map[string][]string{}}
}

// again is an object to read again: it holds a key now.
type again[T Object] struct {
	item string
	obj  T
}

// claim records that item (obj, refused before or not) yields the keys
// pks, and returns the keys it is refused, with their holders ("" while
// the first list decides). A key it holds and no longer yields stays its
// own until release.
func (c *claims[T]) claim(item string, obj T, refusedBefore bool, pks []string) (refused map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.giveUp(item, pks)
	var kept []string
	for _, pk := range c.byItem[item] {
		if list := c.keys[pk]; len(list) > 0 && list[0].item == item && !slices.Contains(pks, pk) {
			kept = append(kept, pk)
		}
	}
	for _, pk := range pks {
		list := c.keys[pk]
		i := slices.IndexFunc(list, func(cl claimant[T]) bool { return cl.item == item })
		if i < 0 {
			i = len(list)
			if !c.listed && !refusedBefore {
				// At start, before those refused before: they never
				// hold a key until the first list is complete.
				if j := slices.IndexFunc(list, func(cl claimant[T]) bool { return cl.refused }); j >= 0 {
					i = j
				}
			}
			list = slices.Insert(list, i, claimant[T]{item: item})
		}
		list[i].refused, list[i].wants = refusedBefore, true
		var zero T
		list[i].obj = zero
		if pending := !c.listed && list[0].refused; i > 0 || pending {
			list[i].obj = obj // read again when it holds the key
			if refused == nil {
				refused = map[string]string{}
			}
			refused[pk] = list[0].item
			if i == 0 {
				refused[pk] = ""
			}
		}
		c.keys[pk] = list
		kept = append(kept, pk)
	}
	if len(kept) == 0 {
		delete(c.byItem, item)
	} else {
		c.byItem[item] = kept
	}
	return refused
}

// giveUp drops item from the keys it no longer yields, but those it
// holds: a holder keeps a key until release.
func (c *claims[T]) giveUp(item string, pks []string) {
	for _, pk := range c.byItem[item] {
		if slices.Contains(pks, pk) {
			continue
		}
		list := c.keys[pk]
		i := slices.IndexFunc(list, func(cl claimant[T]) bool { return cl.item == item })
		switch {
		case i < 0:
		case i == 0:
			list[0].wants = false // held until its row is cleaned up
		default:
			c.keys[pk] = slices.Delete(list, i, i+1)
		}
	}
}

// release ends item's hold on pk (its row is cleaned up), or on every
// key it claims when pk is "" (it is gone), and returns the objects that
// hold a key now, to be read again.
func (c *claims[T]) release(item, pk string) []again[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []again[T]
	pks := c.byItem[item]
	var kept []string
	for _, k := range pks {
		if pk != "" && k != pk {
			kept = append(kept, k)
			continue
		}
		list := c.keys[k]
		i := slices.IndexFunc(list, func(cl claimant[T]) bool { return cl.item == item })
		if i < 0 {
			continue
		}
		if pk != "" && (i != 0 || list[0].wants) {
			kept = append(kept, k) // it yields the key again: still its
			continue
		}
		list = slices.Delete(list, i, i+1)
		if len(list) == 0 {
			delete(c.keys, k)
			continue
		}
		c.keys[k] = list
		if i == 0 {
			// The next holder, and the others, whose messages name it.
			for _, cl := range list {
				out = append(out, again[T]{cl.item, cl.obj})
			}
		}
	}
	if len(kept) == 0 {
		delete(c.byItem, item)
	} else {
		c.byItem[item] = kept
	}
	return out
}

// setListed records that a complete list was seen, and returns the
// objects refused before that hold a key now that no other asked for
// it, to be read again.
func (c *claims[T]) setListed() []again[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listed {
		return nil
	}
	c.listed = true
	var out []again[T]
	for _, list := range c.keys {
		if list[0].refused {
			out = append(out, again[T]{list[0].item, list[0].obj})
		}
	}
	return out
}

// conflictMessage is the condition message of an object refused keys.
func conflictMessage(refused map[string]string) string {
	pks := make([]string, 0, len(refused))
	for pk := range refused {
		pks = append(pks, pk)
	}
	slices.Sort(pks)
	pk := pks[0]
	if refused[pk] == "" {
		return fmt.Sprintf("table key %s was held by another object before the restart: it waits for the first complete list", Quote(pk))
	}
	msg := fmt.Sprintf("table key %s is held by %s, which asked for it first; this object gets it once %s no longer asks for it",
		Quote(pk), refused[pk], refused[pk])
	if len(pks) > 1 {
		msg += fmt.Sprintf(" (and %d more key(s) held by others)", len(pks)-1)
	}
	return msg
}

// claim records the keys of objs as asked for by the object of key, and
// returns objs without those another object holds, and why.
func (t *tracker[T, Obj]) claim(key string, obj T, seen observed, objs []Obj) ([]Obj, string) {
	pks := make([]string, len(objs))
	for i, o := range objs {
		pks[i] = t.pkOf(o)
	}
	refusedBefore := seen.hasCond && seen.cond.Reason == ReasonConflict
	refused := t.claims.claim(key, obj, refusedBefore, pks)
	if len(refused) == 0 {
		return objs, ""
	}
	kept := make([]Obj, 0, len(objs))
	for i, o := range objs {
		if _, no := refused[pks[i]]; !no {
			kept = append(kept, o)
		}
	}
	return kept, conflictMessage(refused)
}

// readAgain has the source read again the objects that hold a key now.
func (t *tracker[T, Obj]) readAgain(reread []again[T]) {
	var zero T
	for _, a := range reread {
		if t.reemit != nil && any(a.obj) != any(zero) {
			t.reemit(a.item, a.obj)
		}
	}
}
