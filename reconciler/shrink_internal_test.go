package reconciler

import (
	"fmt"
	"testing"
)

// TestShrinkAfterBurst: once the request table holds an eighth of the
// rows it held at its peak (of at least 4096), shrink makes its map anew,
// with every row left; below that, or under a smaller peak, it leaves it.
func TestShrinkAfterBurst(t *testing.T) {
	tbl := newRequests[int](true, nil, nil, nil)
	for i := range 8000 {
		tbl.newRow(fmt.Sprintf("k%05d", i))
	}
	for i := range 6000 {
		delete(tbl.rows, fmt.Sprintf("k%05d", i))
	}
	tbl.shrink()
	if tbl.rowsPeak != 8000 {
		t.Fatalf("made anew at %d of 8000 rows", len(tbl.rows))
	}
	for i := 6000; i < 7000; i++ {
		delete(tbl.rows, fmt.Sprintf("k%05d", i))
	}
	old := tbl.rows
	tbl.shrink()
	if tbl.rowsPeak != 1000 || len(tbl.rows) != 1000 {
		t.Fatalf("peak %d, %d rows; want a map made anew with the 1000 left", tbl.rowsPeak, len(tbl.rows))
	}
	for i := 7000; i < 8000; i++ {
		k := fmt.Sprintf("k%05d", i)
		if tbl.rows[k] != old[k] || tbl.rows[k] == nil {
			t.Fatalf("row %s lost", k)
		}
	}
	tbl.shrink() // a peak of 1000: below what is worth making anew
	if tbl.rowsPeak != 1000 {
		t.Fatalf("peak %d after a shrink of a small map", tbl.rowsPeak)
	}
}
