package k8ssource

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// recorded is an EventRecorder that keeps what it is given.
type recorded struct{ events []string }

func (r *recorded) Eventf(_ runtime.Object, _ runtime.Object, typ, reason, _, note string, args ...any) {
	r.events = append(r.events, typ+"/"+reason+": "+fmt.Sprintf(note, args...))
}

// An Event is recorded once per reason and generation, so rewriting the
// same condition (restored after another writer changed it) records
// none; a flapping object's Events stop at EventBurst, and one more is
// allowed per EventInterval.
func TestEventDedupAndRate(t *testing.T) {
	rec := &recorded{}
	w := &statusWriter[*unstructured.Unstructured, int]{
		log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		events: &eventSink{recorder: rec},
	}
	ks := &keyState{}
	ref := &eventTarget{obj: &unstructured.Unstructured{}}
	now := time.Now()
	ok := condition{Status: "True", Reason: ReasonReconciled, Message: "done", ObservedGeneration: 1}
	w.event("k", ks, ok, ref, now)
	w.event("k", ks, ok, ref, now) // the same condition, restored
	w.event("k", ks, condition{Status: "False", Reason: ReasonReconciling, ObservedGeneration: 2}, ref, now)
	if len(rec.events) != 1 || rec.events[0] != "Normal/Reconciled: done" {
		t.Fatalf("events %v", rec.events)
	}
	// Flapping between failing and reconciled, generation after
	// generation: EventBurst in all, the first one included.
	for g := int64(2); g < 20; g++ {
		w.event("k", ks, condition{Status: "False", Reason: ReasonReconcileFailed, Message: "boom", ObservedGeneration: g}, ref, now)
		w.event("k", ks, condition{Status: "True", Reason: ReasonReconciled, Message: "done", ObservedGeneration: g}, ref, now)
	}
	if len(rec.events) != EventBurst {
		t.Fatalf("%d events, want %d: %v", len(rec.events), EventBurst, rec.events)
	}
	w.event("k", ks, condition{Status: "False", Reason: ReasonReconcileFailed, Message: "boom", ObservedGeneration: 30}, ref, now.Add(EventInterval))
	if len(rec.events) != EventBurst+1 || rec.events[EventBurst] != "Warning/ReconcileFailed: boom" {
		t.Fatalf("after an interval: %v", rec.events)
	}
}
