package k8ssource

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
)

// maxHealthErrors bounds the failures health lists.
const maxHealthErrors = 5

// splitKey splits a Key into namespace and name.
func splitKey(key string) (ns, name string) {
	ns, name, found := strings.Cut(key, "/")
	if !found {
		return "", key
	}
	return ns, name
}

// resource is the dynamic client of the object of key's namespace.
func (w *statusWriter[T, Obj]) resource(ns string) dynamic.ResourceInterface {
	r := w.cfg.Client.Resource(w.cfg.Resource)
	if ns != "" {
		return r.Namespace(ns)
	}
	return r
}

// apply writes cond to the status of the object of key with server-side
// apply, forcing ownership of the writer's fields: the condition is this
// writer's alone. dryRun makes the server check and answer, and write
// nothing.
func (w *statusWriter[T, Obj]) apply(ctx context.Context, key string, cond condition, dryRun bool) (*unstructured.Unstructured, error) {
	ns, name := splitKey(key)
	opts := metav1.ApplyOptions{FieldManager: w.cfg.FieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return w.resource(ns).ApplyStatus(ctx, name, statusBody(w.fields, ns, name, cond), opts)
}

// write is a worker's apply of cond to key.
func (w *statusWriter[T, Obj]) write(ctx context.Context, key string, cond condition) writeResult[Obj] {
	began := time.Now()
	u, err := w.apply(ctx, key, cond, false)
	r := writeResult[Obj]{key: key, cond: cond, err: err, took: time.Since(began)}
	if err == nil && w.events != nil {
		r.ref = targetOf(u)
	}
	return r
}

// finish records the outcome of a write. A conflict and a vanished
// object are not failures: the first is retried, the second forgotten.
func (w *statusWriter[T, Obj]) finish(r writeResult[Obj]) {
	if r.check {
		w.checked(r)
		return
	}
	ks := w.state(r.key)
	ks.inflight = false
	// Whatever happened, look at the key again: its state may have moved
	// while the write was in flight, and a failure is retried.
	w.dirty[r.key] = struct{}{}
	now := time.Now()
	switch {
	case r.cleanup != nil:
		w.cleaned(r, ks)
		return
	case r.finalizer:
		w.finalizerPatched(r, ks, now)
		return
	}
	w.metrics.Write(writeOutcome(r.err), r.took)
	switch {
	case r.err == nil:
		w.stats.Writes++
		exempt := w.exempt(ks, r.cond)
		if !exempt {
			ks.tokens = w.tokens(ks, now) - 1
		} else {
			ks.tokens = w.tokens(ks, now)
		}
		ks.written, ks.hasWritten = r.cond, true
		ks.lastWrite, ks.notBefore, ks.attempts, ks.err = now, time.Time{}, 0, nil
		w.event(r.key, ks, r.cond, r.ref, now)
	case apierrors.IsNotFound(r.err):
		// The object is gone (its delete event follows). A resource that
		// lost its status subresource since the check answers the same:
		// the next write checks the resource again.
		w.stats.NotFound++
		w.log.Debug("status write: object not found", "key", r.key)
		delete(w.dirty, r.key)
		ks.err, ks.attempts = nil, 0
		w.fit = false
	case apierrors.IsConflict(r.err):
		w.stats.Conflicts++
		w.log.Debug("status write conflict, retrying", "key", r.key, "error", r.err)
		ks.attempts++
		ks.notBefore = now.Add(w.nextBackoff(ks.attempts))
	default:
		w.stats.Failures++
		ks.attempts++
		ks.notBefore = now.Add(w.nextBackoff(ks.attempts))
		err := w.writeError(r.key, r.err)
		if ks.err == nil || ks.err.Error() != err.Error() {
			w.log.Warn("status write failed, retrying", "error", err)
		}
		ks.err = err
	}
	w.reportHealth()
}

// finalizerPatched records the outcome of a patch of the finalizer: a
// conflict (the object changed) waits for the change, a vanished object
// is forgotten, any other failure is retried with backoff and reported.
func (w *statusWriter[T, Obj]) finalizerPatched(r writeResult[Obj], ks *keyState, now time.Time) {
	switch {
	case r.err == nil:
		ks.finalizerRV, ks.attempts, ks.err, ks.notBefore = r.rv, 0, nil, time.Time{}
	case apierrors.IsConflict(r.err) || apierrors.IsNotFound(r.err):
		ks.finalizerRV = r.rv // tried at this version: its change, or delete, follows
	default:
		ks.attempts++
		ks.notBefore = now.Add(w.nextBackoff(ks.attempts))
		ks.err = fmt.Errorf("finalizer of %s %s: %w", w.cfg.Resource.GroupResource(), r.key, r.err)
		w.log.Warn("finalizer patch failed, retrying", "error", ks.err)
	}
	w.reportHealth()
}

// writeError names the resource and object of a failed write.
func (w *statusWriter[T, Obj]) writeError(key string, err error) error {
	what := "failed"
	if apierrors.IsForbidden(err) {
		what = "forbidden"
	}
	return fmt.Errorf("status of %s %s %s: %w", w.cfg.Resource.GroupResource(), key, what, err)
}

// writeOutcome classifies a write for the metrics.
func writeOutcome(err error) WriteOutcome {
	switch {
	case err == nil:
		return WriteWritten
	case apierrors.IsNotFound(err):
		return WriteNotFound
	case apierrors.IsConflict(err):
		return WriteConflict
	}
	return WriteFailed
}

// reportHealth is OK while no write fails and the resource is fit,
// else Degraded with the resource's problem and the first failures by
// key.
func (w *statusWriter[T, Obj]) reportHealth() {
	errs := w.sortedErrors()
	if err := w.stuck.err(w); err != nil {
		errs = append([]error{err}, errs...)
	}
	if w.fitErr != nil {
		errs = append([]error{w.fitErr}, errs...)
	}
	if len(errs) == 0 {
		w.health.OK(fmt.Sprintf("OK, %d status writes", w.stats.Writes))
		return
	}
	shown := errs[:min(len(errs), maxHealthErrors)]
	summary := fmt.Sprintf("%d status write problem(s)", len(errs))
	if w.stuck.n > 0 {
		summary = fmt.Sprintf("%d object(s) held by a failing cleanup; %d status write problem(s)", w.stuck.n, len(errs)-1)
	}
	w.health.Degraded(summary, errors.Join(shown...))
}

// sortedErrors returns the current failures, by key.
func (w *statusWriter[T, Obj]) sortedErrors() []error {
	type ke struct {
		key string
		err error
	}
	var all []ke
	for k, ks := range w.keys {
		if ks.err != nil {
			all = append(all, ke{k, ks.err})
		}
	}
	slices.SortFunc(all, func(a, b ke) int { return cmp.Compare(a.key, b.key) })
	out := make([]error, len(all))
	for i, e := range all {
		out[i] = e.err
	}
	return out
}
