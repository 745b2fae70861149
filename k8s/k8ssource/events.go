package k8ssource

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	eventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
)

// Limits of the Events of one object: EventBurst at once, then one per
// EventInterval. An Event is recorded only when the condition's reason or
// generation changes, so a steady object records none; these bound a
// flapping one.
const (
	EventBurst    = 5
	EventInterval = time.Minute
)

// EventTypes says which Events the status writer records.
type EventTypes uint8

// The choices of StatusConfig.EventTypes.
const (
	EventsAll      EventTypes = iota // Normal and Warning
	EventsWarnings                   // Warning only: the failures
	EventsNone                       // none, even with Events set
)

// maxNote bounds an Event's note: events.k8s.io/v1 allows 1 kB.
const maxNote = 1024

// eventAction is the action of every Event of the status writer.
const eventAction = "Reconcile"

// eventState is the Events bookkeeping of one object: the reason and
// generation of the last Event, and a token bucket.
type eventState struct {
	reason string
	gen    int64
	tokens float64
	last   time.Time
}

// eventTarget is what an Event says of its object: only the reference.
type eventTarget struct{ obj *unstructured.Unstructured }

// targetOf is the reference of an object the server answered with.
func targetOf(u *unstructured.Unstructured) *eventTarget {
	if u == nil {
		return nil
	}
	md := map[string]any{"name": u.GetName(), "uid": string(u.GetUID()), "resourceVersion": u.GetResourceVersion()}
	if ns := u.GetNamespace(); ns != "" {
		md["namespace"] = ns
	}
	return &eventTarget{obj: &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "metadata": md,
	}}}
}

// eventSink records Events through client-go's events library, which
// folds repeats into a series.
type eventSink struct {
	broadcaster events.EventBroadcaster
	recorder    events.EventRecorder
	controller  string
	cancel      context.CancelFunc
}

func newEventSink(client eventsv1.EventsV1Interface, controller string) *eventSink {
	return &eventSink{broadcaster: events.NewBroadcaster(&events.EventSinkImpl{Interface: client}), controller: controller}
}

// start starts recording; stop ends it, and every write in progress.
func (s *eventSink) start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if err := s.broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		// Only a second start fails.
		panic(err)
	}
	s.recorder = s.broadcaster.NewRecorder(runtime.NewScheme(), s.controller)
}

func (s *eventSink) stop() {
	s.cancel()
	s.broadcaster.Shutdown()
}

// event records the Event of a written condition, if its reason or
// generation changed and the object's bucket has a token.
func (w *statusWriter[T, Obj]) event(key string, ks *keyState, c condition, ref *eventTarget, now time.Time) {
	if w.events == nil || ref == nil {
		return
	}
	typ := corev1.EventTypeNormal
	switch {
	case failure(c.Reason):
		typ = corev1.EventTypeWarning
	case c.Reason != ReasonReconciled:
		return // a state on the way: the condition says it
	}
	es := &ks.events
	if es.reason == c.Reason && es.gen == c.ObservedGeneration {
		return
	}
	if typ == corev1.EventTypeNormal && w.cfg.EventTypes == EventsWarnings {
		// Not recorded, but remembered: a failure after it is a change.
		es.reason, es.gen = c.Reason, c.ObservedGeneration
		return
	}
	tokens := float64(EventBurst)
	if !es.last.IsZero() {
		tokens = min(es.tokens+float64(now.Sub(es.last))/float64(EventInterval), EventBurst)
	}
	if tokens < 1 {
		w.log.Debug("event dropped by the rate limit", "key", key, "reason", c.Reason)
		return
	}
	es.reason, es.gen, es.tokens, es.last = c.Reason, c.ObservedGeneration, tokens-1, now
	note := c.Message
	if len(note) > maxNote {
		note = cutUTF8(note, maxNote-3) + "..."
	}
	w.events.recorder.Eventf(ref.obj, nil, typ, c.Reason, eventAction, "%s", note)
}
