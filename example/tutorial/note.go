package main

import (
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"

	convergeindex "github.com/converge-go/converge/index"
	"github.com/converge-go/converge/reconciler"
)

// Note is one desired file of the notes directory: its name and its text.
// Status is the reconciler's record of how the note is doing.
type Note struct {
	Name   string
	Text   string
	Status reconciler.Status // a named field, not embedded
}

// Clone returns a shallow copy: the reconciler writes statuses into
// copies, never into an object the table holds.
func (n *Note) Clone() *Note {
	c := *n
	return &c
}

// TableHeader and TableRow are what db/show prints.
func (n *Note) TableHeader() []string { return []string{"Name", "Text", "Status"} }
func (n *Note) TableRow() []string    { return []string{n.Name, n.Text, n.Status.Row()} }

// noteName is the primary index: one note per name.
var noteName = statedb.Index[*Note, string]{
	Name:       "name",
	FromObject: func(n *Note) index.KeySet { return index.NewKeySet(index.String(n.Name)) },
	FromKey:    index.String,
	Unique:     true,
}

// noteStatus indexes notes by their status kind, for
// reconciler.WaitForReconciliation and for queries such as "every note in
// Error".
var noteStatus = convergeindex.NewStatusIndex("status", func(n *Note) reconciler.Status { return n.Status })

// newNotesTable creates the table of desired notes.
func newNotesTable(db *statedb.DB) (statedb.RWTable[*Note], error) {
	return statedb.NewTable(db, "notes", noteName, noteStatus)
}
