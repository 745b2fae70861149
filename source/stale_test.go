package source_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/converge-go/converge/source"
)

// A watch stopped by a resync whose watcher emits once its context ends
// (as a goroutine it left behind would) is told ErrStaleWatch, and what it
// emitted never reaches the table.
func TestEmitAfterStopIsStale(t *testing.T) {
	watching := make(chan struct{}, 1)
	late := make(chan error, 8)
	lw := source.Funcs[string]{
		ListFunc: func(context.Context) (source.ListResult[string], error) {
			return source.ListResult[string]{Items: []source.Keyed[string]{{Key: "a", Item: "1"}}, Resume: "1"}, nil
		},
		WatchFunc: func(ctx context.Context, _ string, emit func(source.Event[string]) error) error {
			select {
			case watching <- struct{}{}:
			default:
			}
			<-ctx.Done()
			err := emit(source.Event[string]{Kind: source.Upsert, Key: "stale", Item: "x", Resume: "2"})
			select {
			case late <- err:
			default:
			}
			return ctx.Err()
		},
	}
	var src source.Source
	f := newFixture(t, func(f *fixture, p source.Params) (err error) {
		cfg := storeConfig("s", f.table, nil)
		cfg.ListerWatcher = lw
		src, err = source.New(cfg, p)
		return err
	})
	f.start(time.Minute)
	<-watching
	src.Resync()
	if err := <-late; !errors.Is(err, source.ErrStaleWatch) {
		t.Fatalf("an emit after the watch was stopped returned %v, want ErrStaleWatch", err)
	}
	waitStatus(t, src, "the relist", func(s source.StatusSnapshot) bool { return s.Relists >= 2 })
	if got := f.contents(f.db.ReadTxn(), ""); !mapsEqual(got, map[string]string{"a": "1"}) {
		t.Fatalf("table %v, want only a=1", got)
	}
}
