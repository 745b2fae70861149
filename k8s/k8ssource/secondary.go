package k8ssource

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cilium/hive/cell"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/converge-go/converge/source"
)

// Secondary is another resource that a source's Transform reads: a
// Secret with credentials, a ConfigMap with defaults, a referenced
// object (controller-runtime's Watches). It keeps the resource's objects
// in a cache of its own (list, then watch), which Transform reads with
// Get, naming the primary object it transforms. Get records that the
// primary read that key, found or not; a change of the object at that
// key (created, updated, deleted) has the source read each primary that
// read it again, so that its Transform runs with the new object. The
// primaries are read again from the newest version the source has seen
// of them: no request is made.
//
// Give it to one source, in Config.Secondaries; it runs as a job of
// that source's module. Narrow what it caches with the options'
// selectors: a cache of every Secret of a cluster is every Secret in
// memory.
type Secondary[S Object] struct {
	name string
	lw   *ListerWatcher[S]

	mu      sync.RWMutex
	cache   map[string]S
	readers map[string]map[string]struct{} // secondary key -> primary keys that read it
	synced  chan struct{}

	primaries rereader
}

// rereader is what a Secondary needs of its source: remember the newest
// version of a primary that read a secondary, and read primaries again.
type rereader interface {
	read(primary metav1.Object)
	reread(keys map[string]struct{})
}

// SecondaryResource is a Secondary of any type, for Config.Secondaries.
type SecondaryResource interface {
	bind(r rereader) error
	run(ctx context.Context, health cell.Health) error
	secondaryName() string
}

// NewSecondary returns the Secondary of the resource c lists, named
// name (its job is "k8s-secondary-<source>-<name>").
func NewSecondary[S Object](name string, c Client[S], o ListerWatcherOptions) *Secondary[S] {
	return &Secondary[S]{
		name: name, lw: NewListerWatcher(c, o),
		cache: map[string]S{}, readers: map[string]map[string]struct{}{},
		synced: make(chan struct{}),
	}
}

// Get returns the object namespace/name ("" namespace for a
// cluster-scoped one) from the cache, and false when it has none. It
// records that primary (the object being transformed) read it: a change
// of that object reads primary again.
func (s *Secondary[S]) Get(primary metav1.Object, namespace, name string) (S, bool) {
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	pk := Key(primary)
	s.mu.Lock()
	rs := s.readers[key]
	if rs == nil {
		rs = map[string]struct{}{}
		s.readers[key] = rs
	}
	rs[pk] = struct{}{}
	o, ok := s.cache[key]
	s.mu.Unlock()
	if s.primaries != nil {
		s.primaries.read(primary)
	}
	return o, ok
}

// Synced returns a channel closed once the first list is in the cache.
// Until then Get finds nothing; the primaries that read meanwhile are
// read again with what the list brings.
func (s *Secondary[S]) Synced() <-chan struct{} { return s.synced }

func (s *Secondary[S]) secondaryName() string { return s.name }

var errSecondaryBound = errors.New("a Secondary serves one source only")

func (s *Secondary[S]) bind(r rereader) error {
	if s.primaries != nil {
		return fmt.Errorf("%w: Secondaries: %s: %w", source.ErrInvalidConfig, s.name, errSecondaryBound)
	}
	s.primaries = r
	return nil
}

// run lists and watches the resource until ctx ends, keeping the cache
// and reading again the primaries of what changed.
func (s *Secondary[S]) run(ctx context.Context, health cell.Health) error {
	backoff := newBackoff()
	for ctx.Err() == nil {
		res, err := s.lw.List(ctx)
		if err != nil {
			health.Degraded("list failed", err)
			backoff.wait(ctx)
			continue
		}
		s.replace(res.Items)
		health.OK(fmt.Sprintf("OK, %d objects cached", len(res.Items)))
		resume := res.Resume
		for ctx.Err() == nil {
			err := s.lw.Watch(ctx, resume, func(ev source.Event[S]) error {
				if ev.Resume != "" {
					resume = ev.Resume
				}
				s.apply(ev)
				return nil
			})
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, source.ErrExpired) {
				break // list again
			}
			if err != nil {
				health.Degraded("watch failed", err)
				backoff.wait(ctx)
				continue
			}
			backoff.reset()
		}
	}
	return nil
}

// replace puts a complete list in the cache, and reads again the
// primaries of every key it changes.
func (s *Secondary[S]) replace(items []source.Keyed[S]) {
	changed := map[string]struct{}{}
	s.mu.Lock()
	next := make(map[string]S, len(items))
	for _, it := range items {
		next[it.Key] = it.Item
		if old, ok := s.cache[it.Key]; !ok || old.GetResourceVersion() != it.Item.GetResourceVersion() {
			changed[it.Key] = struct{}{}
		}
	}
	for k := range s.cache {
		if _, ok := next[k]; !ok {
			changed[k] = struct{}{}
		}
	}
	s.cache = next
	first := false
	select {
	case <-s.synced:
	default:
		close(s.synced)
		first = true
	}
	readers := s.readersOf(changed, first)
	s.mu.Unlock()
	s.primaries.reread(readers)
}

// apply puts one watch event in the cache, and reads its primaries
// again.
func (s *Secondary[S]) apply(ev source.Event[S]) {
	s.mu.Lock()
	switch ev.Kind {
	case source.Upsert:
		s.cache[ev.Key] = ev.Item
	case source.Delete:
		delete(s.cache, ev.Key)
	default:
		s.mu.Unlock()
		return
	}
	readers := s.readersOf(map[string]struct{}{ev.Key: {}}, false)
	s.mu.Unlock()
	s.primaries.reread(readers)
}

// readersOf returns the primaries that read the keys; all that read
// anything, with all (what they read before the first list was
// missing).
func (s *Secondary[S]) readersOf(keys map[string]struct{}, all bool) map[string]struct{} {
	out := map[string]struct{}{}
	for k, rs := range s.readers {
		if _, ok := keys[k]; !ok && !all {
			continue
		}
		for r := range rs {
			out[r] = struct{}{}
		}
	}
	return out
}

// primaries is the rereader of one source: the newest version seen of
// each primary that read a secondary.
type primaries[T Object] struct {
	reemit func(key string, obj T)
	mu     sync.Mutex
	objs   map[string]T
}

// read records primary, the version being transformed, unless a newer
// one is known.
func (p *primaries[T]) read(primary metav1.Object) {
	o, ok := primary.(T)
	if !ok {
		return
	}
	p.seen(Key(o), o, true)
}

// seen records obj as the newest version of key, if it is newer than
// the one known; with add, also when key is not known yet.
func (p *primaries[T]) seen(key string, obj T, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	old, ok := p.objs[key]
	if !ok && !add {
		return
	}
	if ok {
		if c, err := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), old.GetResourceVersion()); err == nil && c < 0 {
			return
		}
	}
	p.objs[key] = obj
}

// forget drops a deleted primary.
func (p *primaries[T]) forget(key string) {
	p.mu.Lock()
	delete(p.objs, key)
	p.mu.Unlock()
}

// reread has the source read the primaries of keys again.
func (p *primaries[T]) reread(keys map[string]struct{}) {
	p.mu.Lock()
	again := map[string]T{}
	for k := range keys {
		if o, ok := p.objs[k]; ok {
			again[k] = o
		}
	}
	p.mu.Unlock()
	for k, o := range again {
		p.reemit(k, o)
	}
}

// backoffState waits between failed lists and watches: 100 ms doubling to
// 30 s.
type backoffState struct{ d time.Duration }

func newBackoff() *backoffState { return &backoffState{} }

func (b *backoffState) wait(ctx context.Context) {
	b.d = min(max(b.d*2, 100*time.Millisecond), 30*time.Second)
	t := time.NewTimer(b.d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (b *backoffState) reset() { b.d = 0 }
