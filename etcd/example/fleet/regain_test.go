package main

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// fakeOwnership owns the scopes it is told to, and says so on Changed.
type fakeOwnership struct {
	mu      sync.Mutex
	scopes  []int
	changed chan struct{}
}

func (f *fakeOwnership) Owns([]byte) bool { return true }
func (f *fakeOwnership) Acquire(ctx context.Context, _ []byte) (context.Context, func(), bool) {
	return ctx, func() {}, true
}

func (f *fakeOwnership) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *fakeOwnership) owned() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.scopes)
}

func (f *fakeOwnership) set(scopes ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scopes = scopes
	close(f.changed)
	f.changed = make(chan struct{})
}

// A scope regained after it was lost has its Done groups marked
// Refreshing (the fleet may have changed meanwhile); Pending and Error
// ones are the reconciler's to pick up, and other scopes stay as they are.
func TestRefreshRegainedMarksDoneGroupsOfGainedScopes(t *testing.T) {
	db := statedb.New()
	groups, err := newGroupTable(db)
	if err != nil {
		t.Fatal(err)
	}
	w := db.WriteTxn(groups)
	for _, g := range []*Group{
		{Name: "a", Status: reconciler.StatusDone()},
		{Name: "b", Status: reconciler.StatusPending()},
		{Name: "c", Status: reconciler.StatusDone()}, // scope 1
	} {
		_, _, _ = groups.Insert(w, g)
	}
	w.Commit()
	own := &fakeOwnership{scopes: []int{1}, changed: make(chan struct{})}
	sc := scopes{ownership: own, owned: own.owned, of: func(name string) int {
		if name == "c" {
			return 1
		}
		return 0
	}}
	prunes := make(chan struct{}, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = refreshRegained(ctx, db, groups, sc, func() { prunes <- struct{}{} })
	}()
	defer func() { cancel(); <-done }()
	<-prunes // scope 1, owned at the start: c is marked
	_, _, watch, _ := groups.GetWatch(db.ReadTxn(), groupByName.Query("a"))
	own.set(0, 1) // scope 0 gained
	<-prunes
	<-watch
	want := map[string]reconciler.StatusKind{"a": reconciler.StatusKindRefreshing, "b": reconciler.StatusKindPending, "c": reconciler.StatusKindRefreshing}
	for g := range groups.All(db.ReadTxn()) {
		if g.Status.Kind != want[g.Name] {
			t.Errorf("%s: %v, want %v", g.Name, g.Status.Kind, want[g.Name])
		}
	}
}
