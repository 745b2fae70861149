package source

import (
	"bytes"
	"fmt"
	"sync/atomic"

	"github.com/cilium/statedb"
)

// writer applies items to the table and remembers which objects each key
// produced, so that a changed item's dropped objects, a deleted item and a
// key missing from a relist delete exactly the rows this source wrote. It
// is used only by the source's goroutine.
type writer[Item any, Obj comparable] struct {
	cfg      *Config[Item, Obj]
	pk       statedb.Indexer[Obj]
	owned    map[string]*owned[Obj] // key -> the objects it produced
	nObjects int                    // sum of len(owned[k].objs)
	gen      uint64                 // the current relist, for owned.seen
	failing  map[string]string      // key -> why its item has no (new) objects

	// trustAbsent is set while a write transaction applies a list that
	// was compared on a snapshot of the same table revision: then
	// transformed.absent holds and the lookup before an insert is skipped.
	trustAbsent bool

	// producers counts, per primary key, the items whose objects include
	// it: a row goes only when no item produces it any more, so that a
	// file renamed into place (the new name read before the old one's
	// removal) keeps its objects.
	producers map[string]int

	failingDirty bool // failing changed since the status last listed it
	failingNew   int  // failures recorded since the metrics last counted them
}

func (w *writer[Item, Obj]) setFailing(key, err string) {
	w.failingNew++
	if w.failing[key] != err {
		w.failing[key] = err
		w.failingDirty = true
	}
}

func (w *writer[Item, Obj]) clearFailing(key string) {
	if _, ok := w.failing[key]; ok {
		delete(w.failing, key)
		w.failingDirty = true
	}
}

func newWriter[Item any, Obj comparable](cfg *Config[Item, Obj]) *writer[Item, Obj] {
	return &writer[Item, Obj]{
		cfg:     cfg,
		pk:      cfg.Table.PrimaryIndexer(),
		owned:   map[string]*owned[Obj]{},
		failing: map[string]string{},
	}
}

// owned is what one key produced, as last written.
type owned[Obj any] struct {
	objs []Obj
	seen atomic.Uint64 // the last relist (writer.gen) that listed the key
}

// objsOf returns the objects key produced, or nil.
func (w *writer[Item, Obj]) objsOf(key string) []Obj {
	if e := w.owned[key]; e != nil {
		return e.objs
	}
	return nil
}

// counts is what one commit or relist wrote.
type counts struct{ upserts, deletes int }

func (c *counts) add(o counts) { c.upserts += o.upserts; c.deletes += o.deletes }

// transformed is an item's objects, or why it has none.
type transformed[Obj any] struct {
	key  string
	objs []Obj
	err  error
	del  bool
	// absent: every object was missing from the table at the compare's
	// snapshot (see writer.trustAbsent).
	absent bool
}

// absent reports whether none of objs is in the table at txn.
func (w *writer[Item, Obj]) absent(txn statedb.ReadTxn, objs []Obj) bool {
	for _, o := range objs {
		if _, found := w.get(txn, o); found {
			return false
		}
	}
	return true
}

// transform runs Config.Transform, recovering a panic as the item's error.
func (w *writer[Item, Obj]) transform(key string, item Item) (objs []Obj, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("transform panicked: %v", p)
		}
	}()
	objs, err = w.cfg.Transform(key, item)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if _, ok := w.pk.ObjectToKey(o); !ok {
			return nil, fmt.Errorf("%w in table %s: %+v", ErrNoPrimaryKey, w.cfg.Table.Name(), o)
		}
	}
	return objs, nil
}

// keyOf returns o's primary key. transform admits only objects that have
// one, and the rows read back from the table have one too.
func (w *writer[Item, Obj]) keyOf(o Obj) []byte {
	k, _ := w.pk.ObjectToKey(o)
	return k
}

// get looks o's row up by its primary key.
func (w *writer[Item, Obj]) get(txn statedb.ReadTxn, o Obj) (Obj, bool) {
	q, _ := w.pk.QueryFromObject(o)
	cur, _, found := w.cfg.Table.Get(txn, q)
	return cur, found
}

// unchanged reports whether objs are what key produced last (by
// Config.Equal, in order) and what the table holds, so that applying them
// would write nothing. It allocates nothing but the lookups' keys.
func (w *writer[Item, Obj]) unchanged(txn statedb.ReadTxn, old, objs []Obj) bool {
	if len(old) != len(objs) {
		return false
	}
	for i, o := range objs {
		if !w.cfg.Equal(old[i], o) {
			return false
		}
		cur, found := w.get(txn, o)
		if !found || !w.cfg.Equal(cur, o) {
			return false
		}
	}
	return true
}

// apply writes one item's outcome in txn: an error keeps the item's
// objects, a delete removes them, objects replace the ones the key
// produced before. Rows equal to the new objects are not written.
func (w *writer[Item, Obj]) apply(txn statedb.WriteTxn, t transformed[Obj]) (c counts) {
	if t.err != nil {
		w.setFailing(t.key, t.err.Error())
		return c
	}
	e := w.owned[t.key]
	var old []Obj
	if e != nil {
		old = e.objs
	}
	if t.del {
		w.clearFailing(t.key)
		w.produce(old, -1)
		for _, o := range old {
			c.deletes += w.deleteOwned(txn, o)
		}
		w.nObjects -= len(old)
		delete(w.owned, t.key)
		return c
	}
	// kept filters t.objs in place: the objects now owned.
	kept := t.objs[:0]
	var conflict error
	for _, o := range t.objs {
		var cur Obj
		found := false
		if !t.absent || !w.trustAbsent {
			cur, found = w.get(txn, o)
		}
		switch {
		case found && w.cfg.Equal(cur, o):
		case found && w.cfg.Owns != nil && !w.cfg.Owns(cur) && !w.ownedKey(old, o):
			conflict = fmt.Errorf("%w: %s", ErrOwnedByOther, printable(w.keyOf(o)))
			continue
		default:
			if w.cfg.Pending != nil {
				o = w.cfg.Pending(o)
			}
			if _, _, err := w.cfg.Table.Insert(txn, o); err != nil {
				conflict = fmt.Errorf("insert: %w", err)
				continue
			}
			c.upserts++
		}
		kept = append(kept, o)
	}
	w.produce(kept, +1)
	w.produce(old, -1)
	for _, o := range old {
		if !w.ownedKey(kept, o) {
			c.deletes += w.deleteOwned(txn, o)
		}
	}
	if conflict != nil {
		w.setFailing(t.key, conflict.Error())
	} else {
		w.clearFailing(t.key)
	}
	w.nObjects += len(kept) - len(old)
	switch {
	case len(kept) == 0:
		delete(w.owned, t.key)
	case e != nil:
		e.objs = kept
	default:
		e = &owned[Obj]{objs: kept}
		e.seen.Store(w.gen)
		w.owned[t.key] = e
	}
	return c
}

// ownedKey reports whether objs has an object with o's primary key.
func (w *writer[Item, Obj]) ownedKey(objs []Obj, o Obj) bool {
	k := w.keyOf(o)
	for _, x := range objs {
		if bytes.Equal(w.keyOf(x), k) {
			return true
		}
	}
	return false
}

// deleteOwned deletes o's row unless Config.Owns says it is no longer
// this source's (another writer replaced it).
func (w *writer[Item, Obj]) deleteOwned(txn statedb.WriteTxn, o Obj) int {
	if w.producers[string(w.keyOf(o))] > 0 {
		return 0 // another item of this source produces it now
	}
	cur, found := w.get(txn, o)
	if !found || (w.cfg.Owns != nil && !w.cfg.Owns(cur)) {
		return 0
	}
	if _, _, err := w.cfg.Table.Delete(txn, cur); err != nil {
		return 0
	}
	return 1
}

// produce adds d to the producer count of each object's primary key.
func (w *writer[Item, Obj]) produce(objs []Obj, d int) {
	if w.producers == nil {
		w.producers = map[string]int{}
	}
	for _, o := range objs {
		k := string(w.keyOf(o))
		if n := w.producers[k] + d; n > 0 {
			w.producers[k] = n
		} else {
			delete(w.producers, k)
		}
	}
}

// printable shows a primary key as text when it is printable, else in hex.
func printable(k []byte) string {
	for _, r := range string(k) {
		if r < 0x20 || r > 0x7e {
			return fmt.Sprintf("%x", k)
		}
	}
	return string(k)
}
