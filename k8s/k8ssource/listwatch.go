package k8ssource

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/converge-go/converge/source"
)

// DefaultPageSize is how many objects one page of a paged list carries:
// client-go's informers use 500. 100k objects take 200 round trips;
// larger pages only move the cost into bigger responses.
const DefaultPageSize = 500

// ListerWatcher lists and watches one Kubernetes resource for the source
// layer. Its items are the objects as the API server sends them, keyed
// "namespace/name" ("name" for cluster-scoped ones).
//
// List uses a streaming list (a watch with sendInitialEvents, ended by the
// bookmark that marks the end of the initial events) where the server
// supports it, and falls back for good to a list in pages at one
// resourceVersion where it does not. Watch resumes from the
// resourceVersion it is given, with bookmarks; a 410 Gone or an expired
// resourceVersion returns source.ErrExpired, and the source lists again.
//
// It keeps no copy of the objects: the source's table is the cache.
type ListerWatcher[T Object] struct {
	client      Client[T]
	opts        metav1.ListOptions
	pageSize    int64
	noWatchList atomic.Bool
	// observe, when set, sees every key the list returns (after a
	// complete list) and every deleted key; the status writer's tracker
	// forgets keys with it.
	observe observer
	// again are objects to be read again (reemit), by key, and more
	// says there are some.
	againMu sync.Mutex
	again   map[string]T
	more    chan struct{}
	// primaries, with Config.Secondaries, keeps the newest version of
	// the objects that read a secondary (secondary.go).
	primaries *primaries[T]
}

// reemit has the watch deliver obj again as an upsert of key, as if it
// had changed: the finalizer reads an object being deleted a second
// time, once its rows are in the table, so that it yields nothing.
func (lw *ListerWatcher[T]) reemit(key string, obj T) {
	lw.againMu.Lock()
	defer lw.againMu.Unlock()
	if lw.again == nil {
		lw.again = map[string]T{}
	}
	lw.again[key] = obj
	select {
	case lw.more <- struct{}{}:
	default:
	}
}

// emitAgain delivers the objects reemit asked for.
func (lw *ListerWatcher[T]) emitAgain(emit func(source.Event[T]) error) error {
	lw.againMu.Lock()
	again := lw.again
	lw.again = nil
	lw.againMu.Unlock()
	for key, obj := range again {
		if err := emit(source.Event[T]{Kind: source.Upsert, Key: key, Item: obj}); err != nil {
			return err
		}
	}
	return nil
}

type observer interface {
	listed(keys map[string]struct{})
	deleted(key string)
}

var _ source.ListerWatcher[Object] = (*ListerWatcher[Object])(nil)

// ListerWatcherOptions narrows and tunes a ListerWatcher.
type ListerWatcherOptions struct {
	// LabelSelector and FieldSelector select the objects, as in
	// kubectl's -l and --field-selector. "" selects all.
	LabelSelector, FieldSelector string
	// PageSize is the size of a page of a paged list. Default
	// DefaultPageSize.
	PageSize int64
	// DisableWatchList always lists in pages, never with a streaming list.
	// A server that has the WatchList feature (on by default since
	// Kubernetes 1.32) streams; one that has it off refuses the request,
	// and the ListerWatcher falls back to pages by itself. Set it for a
	// server older than 1.27, which ignores sendInitialEvents, so that
	// the end of the initial events never comes.
	DisableWatchList bool
}

// NewListerWatcher returns the ListerWatcher of the resource c lists.
func NewListerWatcher[T Object](c Client[T], o ListerWatcherOptions) *ListerWatcher[T] {
	if o.PageSize <= 0 {
		o.PageSize = DefaultPageSize
	}
	lw := &ListerWatcher[T]{
		more:     make(chan struct{}, 1),
		client:   c,
		opts:     metav1.ListOptions{LabelSelector: o.LabelSelector, FieldSelector: o.FieldSelector},
		pageSize: o.PageSize,
	}
	lw.noWatchList.Store(o.DisableWatchList)
	return lw
}

// Key is the source key of a Kubernetes object: "namespace/name", or
// "name" for a cluster-scoped object (client-go's MetaNamespaceKeyFunc).
func Key(o interface {
	GetNamespace() string
	GetName() string
}) string {
	if ns := o.GetNamespace(); ns != "" {
		return ns + "/" + o.GetName()
	}
	return o.GetName()
}

// ResourceKey is a key for the table objects made from a Kubernetes
// object that names its resource too: "<resource>.<group>/" and then Key
// ("desiredfiles.files.example.converge.dev/default/motd";
// "configmaps/default/motd" for the core group). Two resources that feed
// one table never collide with it, as they do with Key alone: the same
// namespace/name in both would be two rows, not one row that the second
// source is refused.
func ResourceKey(gr schema.GroupResource, o interface {
	GetNamespace() string
	GetName() string
}) string {
	return gr.String() + "/" + Key(o)
}

// List implements source.ListerWatcher.
func (lw *ListerWatcher[T]) List(ctx context.Context) (source.ListResult[T], error) {
	var (
		res source.ListResult[T]
		err error
	)
	if !lw.noWatchList.Load() {
		res, err = lw.streamingList(ctx)
		if errors.Is(err, errWatchListUnsupported) {
			lw.noWatchList.Store(true)
		}
	}
	if lw.noWatchList.Load() {
		res, err = lw.pagedList(ctx)
	}
	if err == nil && lw.primaries != nil {
		for _, it := range res.Items {
			lw.primaries.seen(it.Key, it.Item, false)
		}
	}
	if err == nil && lw.observe != nil {
		keys := make(map[string]struct{}, len(res.Items))
		for _, it := range res.Items {
			keys[it.Key] = struct{}{}
		}
		lw.observe.listed(keys)
	}
	return res, err
}

// pagedList lists in pages. The first page is a consistent read (no
// resourceVersion: the server reads the newest state, from etcd or from a
// watch cache it has proved current); the continue tokens hold every
// further page at the first page's resourceVersion. A token that expires
// between pages (410) fails the list, which the source retries.
func (lw *ListerWatcher[T]) pagedList(ctx context.Context) (source.ListResult[T], error) {
	var res source.ListResult[T]
	opts := lw.opts
	opts.Limit = lw.pageSize
	for {
		items, lm, err := lw.client.List(ctx, opts)
		if err != nil {
			return source.ListResult[T]{}, fmt.Errorf("list: %w", err)
		}
		if res.Items == nil {
			n := len(items)
			if lm.RemainingItemCount != nil {
				n += int(*lm.RemainingItemCount)
			}
			res.Items = make([]source.Keyed[T], 0, n)
		}
		for _, it := range items {
			res.Items = append(res.Items, source.Keyed[T]{Key: Key(it), Item: it})
		}
		if lm.Continue == "" {
			res.Resume = lm.ResourceVersion
			return res, nil
		}
		opts.Continue = lm.Continue
	}
}

// Watch implements source.ListerWatcher.
func (lw *ListerWatcher[T]) Watch(ctx context.Context, resume string, emit func(source.Event[T]) error) error {
	opts := lw.opts
	opts.ResourceVersion = resume
	opts.AllowWatchBookmarks = true
	w, err := lw.client.Watch(ctx, opts)
	if err != nil {
		return watchError(resume, err)
	}
	defer w.Stop()
	if err := lw.emitAgain(emit); err != nil {
		return err
	}
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-lw.more:
			if err := lw.emitAgain(emit); err != nil {
				return err
			}
			continue
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			// The server ended the watch: its timeout (every 30 to 60
			// minutes), a lost connection, a restart. Not an error: the
			// source watches again from the last resourceVersion, and a
			// server that is gone fails that request.
			return nil
		}
		out, err := lw.event(ev)
		if err != nil {
			return watchError(resume, err)
		}
		if err := emit(out); err != nil {
			return err
		}
	}
}

// event converts one watch event.
func (lw *ListerWatcher[T]) event(ev watch.Event) (source.Event[T], error) {
	if ev.Type == watch.Error {
		return source.Event[T]{}, apierrors.FromObject(ev.Object)
	}
	obj, ok := ev.Object.(T)
	if !ok {
		return source.Event[T]{}, fmt.Errorf("watch event %s carries %T, not %T", ev.Type, ev.Object, obj)
	}
	out := source.Event[T]{Resume: obj.GetResourceVersion()}
	switch ev.Type {
	case watch.Added, watch.Modified:
		out.Kind, out.Key, out.Item = source.Upsert, Key(obj), obj
		if lw.primaries != nil {
			lw.primaries.seen(out.Key, obj, false)
		}
	case watch.Deleted:
		out.Kind, out.Key = source.Delete, Key(obj)
		if lw.primaries != nil {
			lw.primaries.forget(out.Key)
		}
		if lw.observe != nil {
			lw.observe.deleted(out.Key)
		}
	case watch.Bookmark:
		out.Kind = source.Bookmark
	default:
		return source.Event[T]{}, fmt.Errorf("unknown watch event type %q", ev.Type)
	}
	return out, nil
}

// watchError wraps the errors that mean "the resume point is too old" in
// source.ErrExpired.
func watchError(resume string, err error) error {
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return fmt.Errorf("watch from %q: %w: %w", resume, source.ErrExpired, err)
	}
	return fmt.Errorf("watch from %q: %w", resume, err)
}
