package dirsource

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/converge-go/converge/source"
)

// File is one manifest: its name in the directory and its content. It is
// the item type of the source; the key of a file is its name. Err, when
// set, says why the file could not be read (not a regular file, no
// permission, too large); the source's Transform reports it on the file,
// which keeps the objects it had.
type File struct {
	Name string
	Data []byte
	Err  error
}

// ListerWatcher lists and watches the manifests of one directory. List
// opens the inotify watch before it reads the directory, so that nothing
// changed between the two is missed, and hands it to the next Watch, whose
// resume point it returns; a watch cannot be resumed after it ends (inotify
// keeps no history), so a second Watch with that point fails with
// source.ErrExpired and the source lists again. Its methods are for one
// goroutine, the source's.
type ListerWatcher struct {
	dir      string
	match    func(name string) bool
	debounce time.Duration

	// MaxFileSize bounds a manifest (DefaultMaxFileSize when 0): a larger
	// one is not read and is reported (ErrTooLarge).
	MaxFileSize int64

	watcher *fsnotify.Watcher // opened by List, taken by Watch
	token   uint64            // the resume point of watcher
	files   map[string]entry  // each file as the source last got it
	seed    maphash.Seed

	// AllowSymlinksOutside lets a manifest be a symlink that resolves
	// outside the directory; see Config.AllowSymlinksOutside.
	AllowSymlinksOutside bool

	// realDir is dir with its symbolic links resolved, for the reads of
	// one list or flush ("" until one needs it).
	realDir string

	// running is the context of the source's run, from the last List: a
	// decode (New's Transform) in progress is abandoned when it ends.
	running context.Context

	// beforeEvent, when set (by tests), runs before each inotify event is
	// handled: a test stalls it to make the kernel queue overflow.
	beforeEvent func()
	// opening, when set (by tests), runs right before a manifest's open
	// and right after it: a test swaps a symlink there.
	opening func(path string, opened bool)
}

// entry is a file as the source last got it: its stat, and its content's
// hash or its error.
type entry struct {
	st   stamp
	hash uint64
	err  string
}

var _ source.ListerWatcher[File] = (*ListerWatcher)(nil)

// NewListerWatcher returns a ListerWatcher of dir's files that match
// (every *.yaml, *.yml and *.json not starting with "." when match is
// nil), debounced by debounce. It fails when dir is not a directory or is
// on a filesystem where inotify is unreliable (ErrUnsupportedFS), and
// when no inotify instance or watch can be had (ErrInotifyLimit).
func NewListerWatcher(dir string, match func(name string) bool, debounce time.Duration) (*ListerWatcher, error) {
	if match == nil {
		match = DefaultMatch
	}
	lw := &ListerWatcher{dir: dir, match: match, debounce: debounce, files: map[string]entry{}, seed: maphash.MakeSeed(),
		running: context.Background()}
	if err := lw.check(); err != nil {
		return nil, err
	}
	return lw, nil
}

// check verifies the directory and that inotify can watch it.
func (lw *ListerWatcher) check() error {
	st, err := os.Stat(lw.dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s: %w", lw.dir, ErrNotDir)
	}
	if err := checkFS(lw.dir, statfs); err != nil {
		return err
	}
	w, err := lw.open()
	if err != nil {
		return err
	}
	return w.Close()
}

func (lw *ListerWatcher) open() (*fsnotify.Watcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, limitError("inotify", err)
	}
	if err := w.Add(lw.dir); err != nil {
		w.Close()
		return nil, limitError("watch "+lw.dir, err)
	}
	return w, nil
}

// DefaultMatch accepts the names of YAML and JSON files that are not
// hidden: *.yaml, *.yml, *.json, not starting with ".". Editors' temporary
// files and the ".." entries of ConfigMap mounts do not match.
func DefaultMatch(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	switch filepath.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// Close releases the inotify watch a List opened and no Watch took.
func (lw *ListerWatcher) Close() error {
	if lw.watcher == nil {
		return nil
	}
	err := lw.watcher.Close()
	lw.watcher = nil
	return err
}

// List implements source.ListerWatcher: it opens the watch, then reads
// every matching file. A file whose size, times and inode are what they
// were when the source last got it is not read again: it is listed as
// Unchanged. A file that cannot be read is listed with its Err.
func (lw *ListerWatcher) List(ctx context.Context) (source.ListResult[File], error) {
	lw.running = ctx
	lw.Close()
	w, err := lw.open()
	if err != nil {
		return source.ListResult[File]{}, err
	}
	items, files, err := lw.readAll(ctx)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		w.Close()
		return source.ListResult[File]{}, err
	}
	lw.watcher = w
	lw.token++
	lw.files = files
	return source.ListResult[File]{Items: items, Resume: strconv.FormatUint(lw.token, 10)}, nil
}

// readAll reads every matching file of the directory, or stats it only
// when it is unchanged. A file that vanishes meanwhile is skipped.
func (lw *ListerWatcher) readAll(ctx context.Context) ([]source.Keyed[File], map[string]entry, error) {
	lw.realDir = ""
	entries, err := os.ReadDir(lw.dir)
	if err != nil {
		return nil, nil, err
	}
	items := make([]source.Keyed[File], 0, len(entries))
	files := make(map[string]entry, len(entries))
	for _, e := range entries {
		// Each read is short (a regular file, at most MaxFileSize), but
		// a directory may hold many: Stop does not wait for the rest.
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		name := e.Name()
		if !lw.match(name) {
			continue
		}
		if old, ok := lw.files[name]; ok && !old.st.unavailable {
			if fi, err := os.Stat(filepath.Join(lw.dir, name)); err == nil && stampOf(fi) == old.st {
				files[name] = old
				items = append(items, source.Keyed[File]{Key: name, Unchanged: true})
				continue
			}
		}
		f, st, gone := lw.read(name)
		if gone {
			continue
		}
		files[name] = lw.entryOf(f, st)
		items = append(items, source.Keyed[File]{Key: name, Item: f})
	}
	return items, files, nil
}

func (lw *ListerWatcher) maxSize() int64 {
	if lw.MaxFileSize > 0 {
		return lw.MaxFileSize
	}
	return DefaultMaxFileSize
}

func (lw *ListerWatcher) entryOf(f File, st stamp) entry {
	e := entry{st: st}
	if f.Err != nil {
		e.err = f.Err.Error()
	} else {
		e.hash = lw.hash(f.Data)
	}
	return e
}

func (lw *ListerWatcher) hash(data []byte) uint64 { return maphash.Bytes(lw.seed, data) }

// Watch implements source.ListerWatcher. It follows the inotify watch
// that the List which returned resume opened, until ctx ends or inotify
// fails.
func (lw *ListerWatcher) Watch(ctx context.Context, resume string, emit func(source.Event[File]) error) error {
	w := lw.watcher
	if w == nil || resume != strconv.FormatUint(lw.token, 10) {
		return fmt.Errorf("%s: no watch since the last list: %w", lw.dir, source.ErrExpired)
	}
	lw.watcher = nil
	defer w.Close()
	d := newDebouncer(lw.debounce)
	defer d.stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-w.Errors:
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				return fmt.Errorf("%s: %w: %w", lw.dir, source.ErrOverflow, err)
			}
			return fmt.Errorf("%s: inotify: %w", lw.dir, err)
		case ev, ok := <-w.Events:
			if !ok {
				return fmt.Errorf("%s: inotify closed", lw.dir)
			}
			if lw.beforeEvent != nil {
				lw.beforeEvent()
			}
			if err := lw.event(ev, d); err != nil {
				return err
			}
		case <-d.fire():
			names, rescan := d.take()
			if err := lw.flush(ctx, names, rescan, emit); err != nil {
				return err
			}
		}
	}
}

// event notes one inotify event: a matching name is to be read again, a
// ".." name (a ConfigMap's symlink swap) means every file is.
func (lw *ListerWatcher) event(ev fsnotify.Event, d *debouncer) error {
	if filepath.Clean(ev.Name) == filepath.Clean(lw.dir) {
		if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
			return fmt.Errorf("%s: the directory was removed or moved", lw.dir)
		}
		return nil
	}
	name := filepath.Base(ev.Name)
	switch {
	case strings.HasPrefix(name, ".."):
		d.add("", true)
	case lw.match(name):
		d.add(name, false)
	}
	return nil
}

// flush reads the names due and emits what changed: the changed files
// first, in name order, then the removed ones, so that a rename whose two
// events land in different batches briefly has its object twice rather
// than not at all. A file is recorded as the source's only once emit took
// it.
func (lw *ListerWatcher) flush(ctx context.Context, names map[string]struct{}, rescan bool, emit func(source.Event[File]) error) error {
	lw.realDir = ""
	if rescan {
		entries, err := os.ReadDir(lw.dir)
		if err != nil {
			return fmt.Errorf("%s: rescan: %w", lw.dir, err)
		}
		for name := range lw.files {
			names[name] = struct{}{}
		}
		for _, e := range entries {
			if lw.match(e.Name()) {
				names[e.Name()] = struct{}{}
			}
		}
	}
	var removed []string
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		f, st, gone := lw.read(name)
		if gone {
			if _, known := lw.files[name]; known {
				removed = append(removed, name)
			}
			continue
		}
		e := lw.entryOf(f, st)
		if old, known := lw.files[name]; known && old.hash == e.hash && old.err == e.err {
			lw.files[name] = e
			continue
		}
		if err := emit(source.Event[File]{Kind: source.Upsert, Key: name, Item: f}); err != nil {
			return err
		}
		lw.files[name] = e
	}
	for _, name := range removed {
		if err := emit(source.Event[File]{Kind: source.Delete, Key: name}); err != nil {
			return err
		}
		delete(lw.files, name)
	}
	return nil
}
