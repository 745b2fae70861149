package reconciler_test

import (
	"strings"
	"testing"

	"github.com/converge-go/converge/reconciler"
)

// The status table has a column per object count a user acts on, Unset
// included: its header and a row line up, value under name.
func TestWriteStatusTableColumns(t *testing.T) {
	var b strings.Builder
	reconciler.WriteStatusTable(&b, []reconciler.StatusSnapshot{{
		Name: "r", Table: "t",
		Objects: reconciler.ObjectCounts{Pending: 1, Refreshing: 2, Done: 3, Error: 4, Unset: 5},
	}})
	lines := strings.Split(b.String(), "\n")
	header, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	want := map[string]string{"Pending": "1", "Refreshing": "2", "Done": "3", "Error": "4", "Unset": "5"}
	for i, name := range header {
		if v, ok := want[name]; ok {
			if i >= len(row) || row[i] != v {
				t.Errorf("column %s: %q in row %q, want %s", name, row, lines[1], v)
			}
			delete(want, name)
		}
	}
	if len(want) != 0 {
		t.Errorf("columns missing from %q: %v", lines[0], want)
	}
}
