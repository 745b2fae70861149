package k8ssource

import (
	"context"
	"fmt"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
)

// Explainer is what the finalizer needs of a reconciler:
// reconciler.Reconciler has it. Explain says where a key stands for it,
// in particular whether its Delete succeeded.
type Explainer interface {
	Explain(ctx context.Context, key []byte) (reconciler.Explanation, error)
}

// FinalizerConfig has the source hold each Kubernetes object it reads
// until the Deletes of its table objects have succeeded, as
// controllers do for resources outside the cluster:
//
//   - every object without a deletionTimestamp gets the finalizer Name,
//     added by a server-side apply of metadata.finalizers under the
//     status writer's field manager (it needs patch on the resource);
//   - an object being deleted that carries it yields no table objects:
//     the source deletes its rows, and the object stays Terminating,
//     its condition False (CleaningUp), until each of Explainers has
//     reported the Delete of every row as succeeded; then the finalizer
//     is removed and Kubernetes deletes the object. While a Delete
//     fails the condition is False/CleanupFailed with the error, and a
//     Warning Event says so;
//   - an object found Terminating when the process starts, whose rows it
//     never had, gets them first (with Unset's status, so that no Update
//     runs for them), then loses them the same way: its Deletes run, and
//     the finalizer goes once they succeeded.
//
// The explainers also make the condition of a live object wait for the
// Deletes of the table objects it no longer yields. Only the replica
// that Owns an object acts on it.
type FinalizerConfig[Obj comparable] struct {
	// Name is the finalizer, a qualified name such as
	// "files.example.converge.dev/cleanup". Required.
	Name string
	// Explainers are the reconcilers that serve the source's table (each
	// of a StatusSet's): the finalizer goes only once every one of them
	// has reported every Delete as succeeded. Required.
	Explainers []Explainer
	// Unset returns obj (a fresh result of Transform) with the status
	// Unset for each of Explainers, for the rows of an object found
	// Terminating at start. nil: Source.Pending, so Update runs for them
	// before their Delete.
	Unset func(obj Obj) Obj
}

func (c *FinalizerConfig[Obj]) validate() error {
	bad := func(f string) error { return fmt.Errorf("%w: Finalizer.%s", source.ErrInvalidConfig, f) }
	switch {
	case c.Name == "":
		return bad("Name is required")
	case len(c.Explainers) == 0:
		return bad("Explainers are required: the reconcilers that serve the table")
	}
	for i, e := range c.Explainers {
		if e == nil {
			return bad(fmt.Sprintf("Explainers[%d] is nil", i))
		}
	}
	return nil
}

// cleanupPhase is where the cleanup of an object being deleted with the
// finalizer stands.
type cleanupPhase uint8

const (
	cleanupNone     cleanupPhase = iota // not being deleted, or no finalizer
	cleanupStaged                       // its rows were put in the table to be deleted (found Terminating at start)
	cleanupDeleting                     // it yields nothing: its rows are deleted
)

// finalizing is the finalizer's share of Transform and Pending: what an
// object being deleted yields, and the status of the rows staged for a
// Delete.
type finalizing[T Object, Obj comparable] struct {
	cfg     FinalizerConfig[Obj]
	pending func(Obj) Obj
	mu      sync.Mutex
	staged  map[Obj]struct{} // rows yielded for staging, until Pending has seen them
}

// transform is Transform for an object being deleted that carries the
// finalizer: nothing once its rows are in the table (or it never had
// any), else its rows, staged to be deleted.
func (w *statusWriter[T, Obj]) finalTransform(key string, obj T, transform func(T) ([]Obj, error)) []Obj {
	t := w.tracker
	t.mu.Lock()
	st := t.items[key]
	phase := cleanupNone
	if st != nil {
		phase = st.phase
		if phase == cleanupNone && len(st.yielded) > 0 {
			phase = cleanupDeleting // read live here: its rows are in the table
		}
	}
	t.mu.Unlock()
	var objs []Obj
	if phase != cleanupDeleting {
		var err error
		if objs, err = transform(obj); err != nil || len(objs) == 0 {
			objs, phase = nil, cleanupDeleting
		} else {
			phase = cleanupStaged
		}
	}
	objs = t.transformed(key, obj, objs, nil)
	if phase == cleanupStaged {
		w.fin.mu.Lock()
		for _, o := range objs {
			w.fin.staged[o] = struct{}{}
		}
		w.fin.mu.Unlock()
	}
	t.mu.Lock()
	if st := t.items[key]; st != nil {
		st.phase = phase
	}
	t.mu.Unlock()
	return objs
}

// pendingFor is Source.Pending with the finalizer: a staged row gets
// Unset's status.
func (f *finalizing[T, Obj]) pendingFor(o Obj) Obj {
	f.mu.Lock()
	_, staged := f.staged[o]
	delete(f.staged, o)
	f.mu.Unlock()
	switch {
	case staged && f.cfg.Unset != nil:
		return f.cfg.Unset(o)
	case f.pending != nil:
		return f.pending(o)
	}
	return o
}

// finalizerBody is the apply configuration of the object of key at
// resourceVersion rv (a precondition: an object deleted meanwhile is not
// created again) with the finalizer, or without it.
func (w *statusWriter[T, Obj]) finalizerBody(key, rv string, with bool) *unstructured.Unstructured {
	ns, name := splitKey(key)
	md := map[string]any{"name": name, "resourceVersion": rv}
	if ns != "" {
		md["namespace"] = ns
	}
	if with {
		md["finalizers"] = []any{w.fin.cfg.Name}
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": w.cfg.APIVersion, "kind": w.cfg.Kind, "metadata": md}}
}

// patchFinalizer adds the finalizer to the object of key, or removes it
// (an apply that leaves it out drops what this manager owned).
func (w *statusWriter[T, Obj]) patchFinalizer(ctx context.Context, key, rv string, add bool) writeResult[Obj] {
	ns, name := splitKey(key)
	_, err := w.resource(ns).Apply(ctx, name, w.finalizerBody(key, rv, add), metav1.ApplyOptions{FieldManager: w.cfg.FieldManager, Force: true})
	return writeResult[Obj]{key: key, finalizer: true, err: err}
}

// hasFinalizer reports whether o carries the finalizer name.
func hasFinalizer(o interface{ GetFinalizers() []string }, name string) bool {
	return name != "" && slices.Contains(o.GetFinalizers(), name)
}
