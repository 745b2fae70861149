package k8ssource

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/converge-go/converge/source"
)

// errWatchListUnsupported says the server refused a streaming list; the
// ListerWatcher lists in pages from then on.
var errWatchListUnsupported = errors.New("streaming list not supported by the server")

// streamingList lists with a watch that first sends every object as an
// ADDED event and then a bookmark annotated as the end of the initial
// events; that bookmark's resourceVersion is the resume point. The server
// streams objects from its watch cache one by one instead of building a
// whole page in memory, which is what makes it cheaper than a paged list
// for the server and for us.
func (lw *ListerWatcher[T]) streamingList(ctx context.Context) (source.ListResult[T], error) {
	sendInitial := true
	opts := lw.opts
	opts.SendInitialEvents = &sendInitial
	opts.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan
	opts.AllowWatchBookmarks = true
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := lw.client.Watch(ctx, opts)
	if err != nil {
		return source.ListResult[T]{}, listError(err)
	}
	defer w.Stop()
	var res source.ListResult[T]
	// Keys repeat when an object changes while the initial events are
	// sent; the last one wins, as in the source's own coalescing.
	index := map[string]int{}
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return source.ListResult[T]{}, ctx.Err()
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return source.ListResult[T]{}, errors.New("streaming list: watch closed before the initial events ended")
		}
		switch ev.Type {
		case watch.Error:
			return source.ListResult[T]{}, listError(apierrors.FromObject(ev.Object))
		case watch.Bookmark:
			obj, ok := ev.Object.(T)
			if !ok {
				return source.ListResult[T]{}, fmt.Errorf("streaming list: bookmark carries %T", ev.Object)
			}
			if obj.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				res.Resume = obj.GetResourceVersion()
				return res, nil
			}
		case watch.Added, watch.Modified, watch.Deleted:
			obj, ok := ev.Object.(T)
			if !ok {
				return source.ListResult[T]{}, fmt.Errorf("streaming list: event carries %T", ev.Object)
			}
			k := Key(obj)
			i, seen := index[k]
			switch {
			case ev.Type == watch.Deleted && seen:
				res.Items[i].Item = res.Items[len(res.Items)-1].Item
				res.Items[i].Key = res.Items[len(res.Items)-1].Key
				index[res.Items[i].Key] = i
				res.Items = res.Items[:len(res.Items)-1]
				delete(index, k)
			case ev.Type == watch.Deleted:
			case seen:
				res.Items[i].Item = obj
			default:
				index[k] = len(res.Items)
				res.Items = append(res.Items, source.Keyed[T]{Key: k, Item: obj})
			}
		}
	}
}

// listError classifies a failed streaming list: a server that does not
// know sendInitialEvents rejects it as invalid or bad request.
func listError(err error) error {
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		return fmt.Errorf("%w: %w", errWatchListUnsupported, err)
	}
	return fmt.Errorf("streaming list: %w", err)
}
