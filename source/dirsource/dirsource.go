package dirsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/converge-go/converge/source"
)

// Defaults of Config.
const (
	// DefaultDebounce is how long the directory must be quiet before the
	// changed files are read: long enough for an editor's save or a
	// "kubectl cp" to finish, short enough to feel immediate.
	DefaultDebounce = 100 * time.Millisecond
	// DefaultResync is the period of the relist that catches what inotify
	// cannot see (a missed event, a change on a remounted filesystem). A
	// relist of unchanged files writes nothing.
	DefaultResync = 30 * time.Second
)

// Config describes a directory source.
type Config[Obj comparable] struct {
	// Dir is the directory of manifests; only its top level is read.
	// Required.
	Dir string

	// Match selects the manifest files by name. Default DefaultMatch.
	Match func(name string) bool

	// Decode turns one file into its objects. Its error should say where
	// (DecodeYAML's errors carry the line); the source reports it with
	// the file name, and the file keeps the objects it had. Required.
	Decode func(name string, data []byte) ([]Obj, error)

	// Debounce: see DefaultDebounce. It must be positive.
	Debounce time.Duration

	// MaxFileSize bounds a manifest, in bytes: a larger one is not read
	// and is reported on its name (ErrTooLarge), keeping the objects it
	// had. Default DefaultMaxFileSize.
	MaxFileSize int64

	// AllowSymlinksOutside lets a manifest be a symbolic link that
	// resolves outside Dir. By default such a link is not read and is
	// reported on its name (ErrOutsideDir): whoever may write the
	// directory must not get an agent that runs as root to read, and
	// report errors about, a file they cannot read themselves. Links
	// that stay inside Dir, such as the "..data" links of a Kubernetes
	// ConfigMap or Secret mount, are always followed.
	AllowSymlinksOutside bool

	// Source is the rest of the source's configuration: Name, Table,
	// Equal, Pending, Owns, buffer and metrics. Its ListerWatcher and
	// Transform are set by New. Source.Resync defaults to DefaultResync
	// (source.Off turns it off).
	Source source.Config[File, Obj]
}

// Register builds a directory source and adds it to the hive module of p;
// see New.
func Register[Obj comparable](cfg Config[Obj], p source.Params) error {
	_, err := New(cfg, p)
	return err
}

// New checks the directory (it exists, inotify can watch it, its
// filesystem lets inotify see every change) and registers the source.
// Its errors wrap source.ErrInvalidConfig, ErrNotDir, ErrUnsupportedFS or
// ErrInotifyLimit, and say what to do.
func New[Obj comparable](cfg Config[Obj], p source.Params) (source.Source, error) {
	if cfg.Decode == nil {
		return nil, fmt.Errorf("%w: Decode is required", source.ErrInvalidConfig)
	}
	if cfg.Dir == "" {
		return nil, fmt.Errorf("%w: Dir is required", source.ErrInvalidConfig)
	}
	if cfg.Debounce == 0 {
		cfg.Debounce = DefaultDebounce
	}
	if cfg.Debounce < 0 {
		return nil, fmt.Errorf("%w: Debounce %s is negative", source.ErrInvalidConfig, cfg.Debounce)
	}
	if cfg.MaxFileSize < 0 {
		return nil, fmt.Errorf("%w: MaxFileSize %d is negative", source.ErrInvalidConfig, cfg.MaxFileSize)
	}
	lw, err := NewListerWatcher(cfg.Dir, cfg.Match, cfg.Debounce)
	if err != nil {
		return nil, fmt.Errorf("directory source %q: %w", cfg.Source.Name, err)
	}
	lw.MaxFileSize = cfg.MaxFileSize
	lw.AllowSymlinksOutside = cfg.AllowSymlinksOutside
	sc := cfg.Source
	sc.ListerWatcher = lw
	decode := cfg.Decode
	sc.Transform = func(name string, f File) ([]Obj, error) {
		if f.Err != nil {
			return nil, f.Err
		}
		if len(bytes.TrimSpace(f.Data)) == 0 {
			// The state of a file that its writer truncated and has not
			// written yet: keep what it had.
			return nil, ErrEmptyFile
		}
		// The error is reported on the item's key, the file name.
		return abandonable(lw.running, func() ([]Obj, error) { return decode(name, f.Data) })
	}
	if sc.Resync == 0 {
		sc.Resync = DefaultResync
	}

	return source.New(sc, p)
}

// errAbandoned is the error of a decode abandoned because the source
// stopped; the source writes nothing after its run ends, so it is never
// reported.
var errAbandoned = errors.New("decode abandoned: the source is stopping")

// abandonable runs decode on a goroutine of its own and waits for it, or
// for ctx (the source's run) to end: a decode in progress never holds up
// the hive's Stop. An abandoned decode runs to its end unobserved; it
// takes time linear in the file (at most Config.MaxFileSize) and its
// result is dropped. A panic in decode is its error.
func abandonable[Obj any](ctx context.Context, decode func() ([]Obj, error)) ([]Obj, error) {
	type result struct {
		objs []Obj
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				r = result{err: fmt.Errorf("decode panicked: %v", p)}
			}
			done <- r
		}()
		r.objs, r.err = decode()
	}()
	select {
	case r := <-done:
		return r.objs, r.err
	case <-ctx.Done():
		return nil, errAbandoned
	}
}
