package k8ssource

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-go/converge/source"
)

// errTableRequired: the status writer follows the source's table.
var errTableRequired = fmt.Errorf("%w: Source.Table is required", source.ErrInvalidConfig)

// maxHealthErrors bounds the failures health lists.
const maxHealthErrors = 5

// apply writes cond to the status of the object of key with server-side
// apply, forcing ownership of the condition's fields: the condition is
// this writer's alone.
func (w *statusWriter[T, Obj]) apply(ctx context.Context, key string, cond condition) error {
	ns, name, found := strings.Cut(key, "/")
	if !found {
		ns, name = "", key
	}
	body := applyBody(w.cfg.APIVersion, w.cfg.Kind, ns, name, cond)
	r := w.cfg.Client.Resource(w.cfg.Resource)
	opts := metav1.ApplyOptions{FieldManager: w.cfg.FieldManager, Force: true}
	var err error
	if ns != "" {
		_, err = r.Namespace(ns).ApplyStatus(ctx, name, body, opts)
	} else {
		_, err = r.ApplyStatus(ctx, name, body, opts)
	}
	return err
}

// finish records the outcome of a write. A conflict and a vanished
// object are not failures: the first is retried, the second forgotten.
func (w *statusWriter[T, Obj]) finish(r writeResult) {
	ks := w.state(r.key)
	ks.inflight = false
	// Whatever happened, look at the key again: its state may have moved
	// while the write was in flight, and a failure is retried.
	w.dirty[r.key] = struct{}{}
	now := time.Now()
	switch {
	case r.err == nil:
		w.stats.Writes++
		ks.written, ks.hasWritten = r.cond, true
		ks.tokens = w.tokens(ks, now) - 1
		ks.lastWrite, ks.notBefore, ks.attempts, ks.err = now, time.Time{}, 0, nil
	case apierrors.IsNotFound(r.err):
		// The object is gone (its delete event follows) or its status
		// subresource is not served: nothing to write to.
		w.stats.NotFound++
		w.log.Debug("status write: object not found", "key", r.key)
		delete(w.dirty, r.key)
		ks.err, ks.attempts = nil, 0
		if len(ks.rows) == 0 {
			delete(w.keys, r.key)
		}
	case apierrors.IsConflict(r.err):
		w.stats.Conflicts++
		w.log.Debug("status write conflict, retrying", "key", r.key, "error", r.err)
		ks.attempts++
		ks.notBefore = now.Add(w.nextBackoff(ks.attempts))
	default:
		w.stats.Failures++
		ks.attempts++
		ks.notBefore = now.Add(w.nextBackoff(ks.attempts))
		what := "failed"
		if apierrors.IsForbidden(r.err) {
			what = "forbidden"
		}
		err := fmt.Errorf("status of %s %s %s: %w", w.cfg.Resource.GroupResource(), r.key, what, r.err)
		if ks.err == nil || ks.err.Error() != err.Error() {
			w.log.Warn("status write failed, retrying", "error", err)
		}
		ks.err = err
	}
	w.reportHealth()
}

// reportHealth is OK while no write fails, else Degraded with the first
// failures by key.
func (w *statusWriter[T, Obj]) reportHealth() {
	errs := w.sortedErrors()
	if len(errs) == 0 {
		w.health.OK(fmt.Sprintf("OK, %d status writes", w.stats.Writes))
		return
	}
	shown := errs[:min(len(errs), maxHealthErrors)]
	w.health.Degraded(fmt.Sprintf("%d status write(s) failing", len(errs)), errors.Join(shown...))
}
