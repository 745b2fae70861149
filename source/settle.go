package source

import (
	"fmt"
	"strings"

	"github.com/cilium/statedb"
)

// apply applies a batch of item outcomes (a commit's events, a relist's
// changed items) in txn: first to the model, so that a move of an object
// from one item to another nets out, then to each touched row once.
func (w *writer[Item, Obj]) apply(txn statedb.WriteTxn, ts []transformed[Obj]) (c counts) {
	w.mark++
	w.touched = w.touched[:0]
	for _, t := range ts {
		w.update(t)
	}
	for _, ps := range w.touched {
		c.add(w.settle(txn, ps))
	}
	w.touched = w.touched[:0]
	w.report()
	return c
}

// settle makes one row what the model says, under the one rule of
// ownership: the source writes or deletes a row only while it is the
// source's (mine). The content is the object of the first producer by
// item key; a row no item yields any more is deleted if the source still
// holds it. Config.Equal only decides whether a write is needed.
func (w *writer[Item, Obj]) settle(txn statedb.WriteTxn, ps *pkState[Obj]) (c counts) {
	had := ps.other != "" || len(ps.producers) > 1
	have := len(ps.producers) > 0
	if !have && !ps.holds {
		ps.other = ""
		w.noteOther(ps)
		delete(w.rows, ps.key)
		w.affectProducers(ps, had)
		return c
	}
	var want Obj
	rep := ps.written
	if have {
		want = ps.producers[0].obj
		rep = want
	}
	var cur Obj
	found := false
	if !ps.absent || !w.trustAbsent {
		cur, found = w.get(txn, rep)
	}
	ps.absent = false
	ps.other = ""
	switch {
	case found && !w.mine(ps, cur):
		w.release(ps)
		if have {
			ps.other = w.ownedByOther(ps.key, cur)
		}
	case !have:
		if found {
			if _, _, err := w.cfg.Table.Delete(txn, cur); err == nil {
				c.deletes++
			}
		}
		w.release(ps)
	case found && w.cfg.Equal(cur, want):
		w.hold(ps, cur)
	default:
		o := want
		if w.cfg.Pending != nil {
			o = w.cfg.Pending(o)
		}
		if _, _, err := w.cfg.Table.Insert(txn, o); err != nil {
			ps.other = fmt.Sprintf("insert %s: %v", printable([]byte(ps.key)), err)
			break
		}
		c.upserts++
		w.hold(ps, o)
	}
	if len(ps.producers) == 0 && !ps.holds {
		delete(w.rows, ps.key)
	}
	w.noteOther(ps)
	w.affectProducers(ps, had)
	return c
}

// mine reports whether the row cur of ps is the source's to write or
// delete: with Config.Owns, whatever Owns says; without it, only while
// the row is still what the source wrote (its content, Equal; the status
// is the reconciler's). A row the source never wrote is another
// writer's.
func (w *writer[Item, Obj]) mine(ps *pkState[Obj], cur Obj) bool {
	if w.cfg.Owns != nil {
		return w.cfg.Owns(cur)
	}
	return ps.holds && w.cfg.Equal(cur, ps.written)
}

// noteOther keeps w.others, the rows to watch for their release.
func (w *writer[Item, Obj]) noteOther(ps *pkState[Obj]) {
	_, was := w.others[ps.key]
	switch is := ps.other != "" && len(ps.producers) > 0; {
	case is && !was:
		w.others[ps.key] = ps
		w.blockedDirty = true
	case !is && was:
		delete(w.others, ps.key)
		w.blockedDirty = true
	}
}

func (w *writer[Item, Obj]) hold(ps *pkState[Obj], o Obj) {
	if !ps.holds {
		ps.holds = true
		w.nObjects++
	}
	ps.written = o
}

func (w *writer[Item, Obj]) release(ps *pkState[Obj]) {
	if ps.holds {
		ps.holds = false
		w.nObjects--
	}
	var zero Obj
	ps.written = zero
}

// ownedByOther is the report of a row another writer has.
func (w *writer[Item, Obj]) ownedByOther(key string, cur Obj) string {
	msg := fmt.Sprintf("%v: %s", ErrOwnedByOther, printable([]byte(key)))
	if w.cfg.Owner != nil {
		if who := w.cfg.Owner(cur); who != "" {
			msg += " (written by " + who + ")"
		}
	}
	return msg
}

// affectProducers marks the producers of ps for a new report when ps has
// or had a problem, or its only producer is reported.
func (w *writer[Item, Obj]) affectProducers(ps *pkState[Obj], had bool) {
	if !had && ps.other == "" && len(ps.producers) <= 1 &&
		(len(ps.producers) == 0 || w.failing[ps.producers[0].key] == "") {
		return
	}
	for _, p := range ps.producers {
		w.affect[p.key] = struct{}{}
	}
}

// report refreshes the reports of the items the batch affected.
func (w *writer[Item, Obj]) report() {
	for key := range w.affect {
		if msg := w.message(key); msg != "" {
			w.setFailing(key, msg)
		} else {
			w.clearFailing(key)
		}
	}
	clear(w.affect)
}

// message is why an item is reported: its Transform error, else the
// first problem of a row it yields (another writer has it, another item
// yields it too), else "".
func (w *writer[Item, Obj]) message(key string) string {
	it := w.items[key]
	if it == nil {
		return ""
	}
	if it.err != "" {
		return it.err
	}
	for _, ps := range it.rows {
		if ps.other != "" {
			return ps.other
		}
		if len(ps.producers) > 1 {
			return w.duplicate(ps, key)
		}
	}
	return ""
}

// duplicate is the report of an object that several items yield, on one
// of them: it names the others and the one whose object is used.
func (w *writer[Item, Obj]) duplicate(ps *pkState[Obj], key string) string {
	others := make([]string, 0, len(ps.producers)-1)
	for _, p := range ps.producers {
		if p.key != key {
			others = append(others, p.key)
		}
	}
	used := ps.producers[0].key
	if used == key {
		used = "this item's"
	} else {
		used += "'s"
	}
	return fmt.Sprintf("%v: %s is also yielded by %s; %s is used (the first by key)",
		ErrDuplicate, printable([]byte(ps.key)), strings.Join(others, ", "), used)
}

func (w *writer[Item, Obj]) setFailing(key, msg string) {
	if w.failing[key] != msg {
		w.failingNew++
		w.failing[key] = msg
		w.failingDirty = true
	}
}

func (w *writer[Item, Obj]) clearFailing(key string) {
	if _, ok := w.failing[key]; ok {
		delete(w.failing, key)
		w.failingDirty = true
	}
}
