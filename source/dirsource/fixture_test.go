package dirsource_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"

	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/dirsource"
)

// manifest is one object of a manifest file.
type manifest struct {
	Key   string `yaml:"key" json:"key"`
	Value string `yaml:"value" json:"value"`
}

type obj struct {
	Key, Value, File string
	Status           reconciler.Status
}

func (o *obj) TableHeader() []string { return []string{"Key", "Value", "File"} }
func (o *obj) TableRow() []string    { return []string{o.Key, o.Value, o.File} }

var keyIndex = statedb.Index[*obj, string]{
	Name:       "key",
	FromObject: func(o *obj) index.KeySet { return index.NewKeySet(index.String(o.Key)) },
	FromKey:    index.String,
	FromString: index.FromString,
	Unique:     true,
}

// decode reads a manifest file; a manifest without a key is an error.
func decode(name string, data []byte) ([]*obj, error) {
	ms, err := dirsource.DecodeYAML[manifest](data)
	if err != nil {
		return nil, err
	}
	objs := make([]*obj, len(ms))
	for i, m := range ms {
		if m.Key == "" {
			return nil, fmt.Errorf("document %d: no key", i+1)
		}
		objs[i] = &obj{Key: m.Key, Value: m.Value, File: name}
	}
	return objs, nil
}

type fixture struct {
	t       testing.TB
	hive    *hive.Hive
	log     *slog.Logger
	stopped bool
	dir     string
	db      *statedb.DB
	table   statedb.RWTable[*obj]
	src     source.Source
	mu      sync.Mutex
	writes  map[string]int // key -> rows written
}

// start runs a hive with one directory source over a new temporary
// directory that prepare fills first.
func start(t testing.TB, prepare func(dir string), tune func(*dirsource.Config[*obj])) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), writes: map[string]int{}}
	if prepare != nil {
		prepare(f.dir)
	}
	log := hivetest.Logger(t, hivetest.LogLevel(slog.LevelError))
	h := hive.New(
		statedb.Cell, job.Cell,
		cell.Provide(cell.NewSimpleHealth),
		cell.Module("test", "Test",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db *statedb.DB, p source.Params) (err error) {
				f.db = db
				if f.table, err = statedb.NewTable(db, "objects", keyIndex); err != nil {
					return err
				}
				cfg := dirsource.Config[*obj]{
					Dir:      f.dir,
					Decode:   decode,
					Debounce: 20 * time.Millisecond,
					Source: source.Config[dirsource.File, *obj]{
						Name:  "dir",
						Table: f.table,
						Equal: func(a, b *obj) bool { return a.Key == b.Key && a.Value == b.Value && a.File == b.File },
						Pending: func(o *obj) *obj {
							f.mu.Lock()
							f.writes[o.Key]++
							f.mu.Unlock()
							o.Status = reconciler.StatusPending()
							return o
						},
						BufferWait: time.Millisecond,
						BackoffMin: time.Millisecond,
						BackoffMax: 20 * time.Millisecond,
					},
				}
				if tune != nil {
					tune(&cfg)
				}
				f.src, err = dirsource.New(cfg, p)
				return err
			}),
		),
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	if err := h.Start(log, ctx); err != nil {
		t.Fatal(err)
	}
	f.hive, f.log = h, log
	t.Cleanup(func() {
		if !f.stopped {
			f.stop(context.Background())
		}
	})
	return f
}

// stop stops the hive (once), failing the test if that fails within ctx.
func (f *fixture) stop(ctx context.Context) {
	f.t.Helper()
	f.stopped = true
	if err := f.hive.Stop(f.log, ctx); err != nil {
		f.t.Error(err)
	}
}

// contents is the table as "key=value@file" strings, sorted.
func (f *fixture) contents(txn statedb.ReadTxn) string {
	var out []string
	for o := range f.table.All(txn) {
		out = append(out, o.Key+"="+o.Value+"@"+o.File)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// wait waits until the table's contents are want, waking on table
// changes, for at most 20 seconds.
func (f *fixture) wait(want string) {
	f.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		txn := f.db.ReadTxn()
		_, watch := f.table.AllWatch(txn)
		initialized, initWatch := f.table.Initialized(txn)
		if initialized {
			initWatch = nil // closed: it would spin
		}
		got := f.contents(txn)
		if got == want {
			return
		}
		select {
		case <-watch:
		case <-initWatch:
		case <-deadline:
			f.t.Fatalf("table is %q, want %q", got, want)
		}
	}
}

// waitStatus polls the source's status (bounded) until cond holds.
func (f *fixture) waitStatus(what string, cond func(source.StatusSnapshot) bool) source.StatusSnapshot {
	f.t.Helper()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := f.src.Status()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting for %s: %+v", what, s)
		}
		<-tick.C
	}
}

func (f *fixture) writeCounts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.writes)
}

// write writes a file in place (not atomically).
func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replace writes a file as editors do: to a temporary name, then renamed
// into place.
func replace(t *testing.T, path, data string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	write(t, tmp, data)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
