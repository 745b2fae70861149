package main

import (
	"context"
	"slices"
	"sync"
	"testing"
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

// Each time scopes are gained (at the start too), a prune is triggered;
// a change that gains nothing triggers none.
func TestPruneRegainedOnGainedScopes(t *testing.T) {
	own := &fakeOwnership{scopes: []int{1}, changed: make(chan struct{})}
	sc := scopes{ownership: own, owned: own.owned, of: func(string) int { return 0 }}
	prunes := make(chan struct{}, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = pruneRegained(ctx, sc, func() { prunes <- struct{}{} })
	}()
	defer func() { cancel(); <-done }()
	<-prunes      // scope 1, owned at the start
	own.set(1)    // nothing gained
	own.set(0, 1) // scope 0 gained
	<-prunes
	select {
	case <-prunes:
		t.Error("a change that gained nothing triggered a prune")
	default:
	}
}
