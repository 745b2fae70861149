package source

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/cilium/statedb"
)

// writer keeps the source's model of what its items yield and applies it
// to the table. It answers "whose row is this" with one rule for writes
// and deletes alike (settle), derives each object's content from the
// items that yield it now, and nets out the changes of a whole commit per
// object key before it writes. It is used only by the source's goroutine
// (compare's workers only read it).
type writer[Item any, Obj comparable] struct {
	cfg   *Config[Item, Obj]
	pk    statedb.Indexer[Obj]
	items map[string]*item[Obj]    // item key -> what it yields
	rows  map[string]*pkState[Obj] // object primary key -> its producers and row
	gen   uint64                   // the current relist, for item.seen

	nObjects int // rows the source wrote and still holds
	neverOK  int // items that failed and were never read successfully

	// trustAbsent is set while a write transaction applies a list that
	// was compared on a snapshot of the same table revision: then
	// transformed.absent holds and the lookup before an insert is skipped.
	trustAbsent bool

	touched []*pkState[Obj] // rows to settle at the end of the batch
	mark    uint64          // pkState.mark of the current batch
	affect  map[string]struct{}

	// others are the rows that have had a problem (another writer, a
	// failed insert); blockedDirty says the set to watch changed.
	others       map[string]*pkState[Obj]
	blockedDirty bool

	failing      map[string]string // item key -> why it is reported
	failingDirty bool              // failing changed since the status last listed it
	failingNew   int               // failures recorded since the metrics last counted them
}

// item is what one key of the source yields: the objects of its last
// successful Transform, kept while it fails.
type item[Obj any] struct {
	objs []Obj
	rows []*pkState[Obj] // the state of each of objs' primary keys
	err  string          // the current Transform error, "" when it is good
	ok   bool            // it was read successfully at least once
	seen atomic.Uint64   // the last relist (writer.gen) that listed the key
}

// producer is one item's object for a primary key.
type producer[Obj any] struct {
	key string
	obj Obj
}

// pkState is one object primary key: the items that yield it, sorted by
// item key (the first one's object is the content), and the row the
// source wrote for it.
type pkState[Obj any] struct {
	key       string
	producers []producer[Obj]
	written   Obj  // the object the source last wrote or found equal
	holds     bool // written is valid: the row is the source's
	absent    bool // no row at the compare's snapshot (trustAbsent)
	other     string
	mark      uint64
}

func newWriter[Item any, Obj comparable](cfg *Config[Item, Obj]) *writer[Item, Obj] {
	return &writer[Item, Obj]{
		cfg:     cfg,
		pk:      cfg.Table.PrimaryIndexer(),
		items:   map[string]*item[Obj]{},
		rows:    map[string]*pkState[Obj]{},
		failing: map[string]string{},
		affect:  map[string]struct{}{},
		others:  map[string]*pkState[Obj]{},
	}
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

// transform runs Config.Transform, recovering a panic as the item's
// error, and refuses objects without a primary key and a primary key
// repeated within the item. Its errors quote no more than a short prefix
// of any key or value (shorten): they go to health, logs and Status.
func (w *writer[Item, Obj]) transform(key string, it Item) (objs []Obj, err error) {
	defer func() {
		if p := recover(); p != nil {
			objs, err = nil, fmt.Errorf("transform panicked: %v", p)
		}
		err = shorten(err)
	}()
	objs, err = w.cfg.Transform(key, it)
	if err != nil {
		return nil, err
	}
	var seen map[string]struct{}
	if len(objs) > 1 {
		seen = make(map[string]struct{}, len(objs))
	}
	for _, o := range objs {
		k, ok := w.pk.ObjectToKey(o)
		if !ok {
			return nil, fmt.Errorf("%w in table %s: %s", ErrNoPrimaryKey, w.cfg.Table.Name(), Quote(fmt.Sprintf("%+v", o)))
		}
		if seen == nil {
			continue
		}
		if _, dup := seen[string(k)]; dup {
			return nil, fmt.Errorf("%w: %s appears twice in this item", ErrDuplicate, printable(k))
		}
		seen[string(k)] = struct{}{}
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

// absent reports whether none of objs is in the table at txn.
func (w *writer[Item, Obj]) absent(txn statedb.ReadTxn, objs []Obj) bool {
	for _, o := range objs {
		if _, found := w.get(txn, o); found {
			return false
		}
	}
	return true
}

// unchanged reports whether objs are what key yields now (by
// Config.Equal, in order), and each is a row the source holds alone,
// unchallenged, equal in the table: applying them would write nothing and
// change no report. It only reads, and allocates nothing but the lookups'
// keys.
func (w *writer[Item, Obj]) unchanged(txn statedb.ReadTxn, it *item[Obj], objs []Obj) bool {
	if it == nil || it.err != "" || len(it.objs) != len(objs) {
		return false
	}
	for i, o := range objs {
		if !w.cfg.Equal(it.objs[i], o) {
			return false
		}
		// The objects are equal, so they have the same primary key.
		ps := it.rows[i]
		if !ps.holds || len(ps.producers) != 1 || ps.other != "" {
			return false
		}
		cur, found := w.get(txn, o)
		if !found || !w.cfg.Equal(cur, o) || (w.cfg.Owns != nil && !w.cfg.Owns(cur)) {
			return false
		}
	}
	return true
}

// settled reports whether the rows of a failing item's kept objects are
// as the source left them: every row it holds is still there, its own
// and unchanged. Otherwise a relist settles them again.
func (w *writer[Item, Obj]) settled(txn statedb.ReadTxn, it *item[Obj]) bool {
	for i, o := range it.objs {
		ps := it.rows[i]
		if !ps.holds {
			continue
		}
		cur, found := w.get(txn, o)
		if !found || !w.mine(ps, cur) || !w.cfg.Equal(cur, ps.written) {
			return false
		}
	}
	return true
}

// update changes the model by one item's outcome and notes the rows it
// touches; settle then writes them. A failure keeps the item's objects.
func (w *writer[Item, Obj]) update(t transformed[Obj]) {
	it := w.items[t.key]
	if t.err != nil || w.failing[t.key] != "" {
		w.affect[t.key] = struct{}{}
	}
	switch {
	case t.del:
		if it == nil {
			return
		}
		for _, ps := range it.rows {
			w.removeProducer(t.key, ps)
		}
		if !it.ok {
			w.neverOK--
		}
		delete(w.items, t.key)
	case t.err != nil:
		if it == nil {
			it = &item[Obj]{}
			it.seen.Store(w.gen)
			w.items[t.key] = it
			w.neverOK++
		}
		it.err = t.err.Error()
		// The kept objects' rows are settled again: another writer may
		// have taken one over meanwhile.
		for _, ps := range it.rows {
			w.touch(ps)
		}
	default:
		if it == nil {
			it = &item[Obj]{}
			it.seen.Store(w.gen)
			w.items[t.key] = it
		} else if !it.ok {
			w.neverOK--
		}
		for _, ps := range it.rows {
			w.removeProducer(t.key, ps)
		}
		it.objs, it.err, it.ok = t.objs, "", true
		it.rows = make([]*pkState[Obj], len(t.objs))
		for i, o := range t.objs {
			it.rows[i] = w.addProducer(t.key, o, t.absent)
		}
	}
}

// row returns the state of o's primary key, created when missing.
func (w *writer[Item, Obj]) row(o Obj) *pkState[Obj] {
	k := w.keyOf(o)
	ps := w.rows[string(k)]
	if ps == nil {
		ps = &pkState[Obj]{key: string(k)}
		w.rows[ps.key] = ps
	}
	w.touch(ps)
	return ps
}

func (w *writer[Item, Obj]) touch(ps *pkState[Obj]) {
	if ps.mark != w.mark {
		ps.mark = w.mark
		w.touched = append(w.touched, ps)
	}
}

func (w *writer[Item, Obj]) addProducer(key string, o Obj, absent bool) *pkState[Obj] {
	ps := w.row(o)
	ps.absent = absent && len(ps.producers) == 0 && !ps.holds
	i, _ := slices.BinarySearchFunc(ps.producers, key, func(p producer[Obj], k string) int { return strings.Compare(p.key, k) })
	ps.producers = slices.Insert(ps.producers, i, producer[Obj]{key: key, obj: o})
	return ps
}

func (w *writer[Item, Obj]) removeProducer(key string, ps *pkState[Obj]) {
	w.touch(ps)
	ps.producers = slices.DeleteFunc(ps.producers, func(p producer[Obj]) bool { return p.key == key })
}

// printable shows a primary key as text when it is printable, else in
// hex; either way at most MaxQuoted bytes of it, and its length when it
// is cut (a key can be content: a manifest's name field).
func printable(k []byte) string {
	cut := k[:len(cutString(string(k), MaxQuoted))]
	s := string(cut)
	for _, r := range s {
		if r < 0x20 || r > 0x7e {
			s = fmt.Sprintf("%x", cut)
			break
		}
	}
	if len(cut) < len(k) {
		s += fmt.Sprintf("... (%d bytes)", len(k))
	}
	return s
}
