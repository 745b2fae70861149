package k8ssource

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
)

// Before its first write, and again after a write found no object, the
// writer checks that the resource can take its writes, with the one
// permission it has anyway (patch on the status subresource) and
// nothing written: a dry-run apply of the write it is about to make.
//
//   - A resource without a status subresource answers 404 for an object
//     that exists (a list, which the source may do, tells the two
//     apart).
//   - The field manager's managed fields in the answer say how the
//     server merges status.conditions: entries k:{"type":...} for a map
//     list keyed by type, nothing under f:conditions for an atomic list,
//     which every apply would replace whole, other managers' conditions
//     included.
//
// Until the check passes nothing is written and health says what to
// change in the CRD; it is made again with backoff, so a CRD that is
// fixed is picked up.

// check is a worker's dry-run apply of cond to key, which tells whether
// the resource can take the writer's writes.
func (w *statusWriter[T, Obj]) check(ctx context.Context, key string, cond condition) writeResult[Obj] {
	r := writeResult[Obj]{key: key, cond: cond, check: true}
	u, err := w.apply(ctx, key, cond, true)
	switch {
	case err == nil:
		r.unfit = w.conditionsKeyedByType(u)
	case apierrors.IsNotFound(err):
		exists, lerr := w.exists(ctx, key)
		switch {
		case lerr != nil:
			r.err = lerr
		case exists:
			r.unfit = fmt.Errorf("%w: the CRD %s has no status subresource: add subresources: {status: {}} to its version %s",
				ErrNoStatusSubresource, w.cfg.Resource.GroupResource(), w.cfg.Resource.Version)
		default:
			r.err = err // the object is gone: check with another
		}
	default:
		r.err = err
	}
	return r
}

// exists reports whether the object of key exists, with a list (the
// source's permission) rather than a get.
func (w *statusWriter[T, Obj]) exists(ctx context.Context, key string) (bool, error) {
	ns, name := splitKey(key)
	l, err := w.resource(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return false, err
	}
	return len(l.Items) > 0, nil
}

// conditionsKeyedByType checks, in the managed fields of a dry-run
// apply's answer, that the server merges status.conditions by type.
func (w *statusWriter[T, Obj]) conditionsKeyedByType(u *unstructured.Unstructured) error {
	unfit := func(why string) error {
		return fmt.Errorf("%w: status.conditions of the CRD %s %s: declare it with x-kubernetes-list-type: map and x-kubernetes-list-map-keys: [type], as metav1.Condition lists are; until then nothing is written, since every write would replace the conditions of the other field managers",
			ErrConditionsNotMapList, w.cfg.Resource.GroupResource(), why)
	}
	for _, mf := range u.GetManagedFields() {
		if mf.Manager != w.cfg.FieldManager || mf.Operation != metav1.ManagedFieldsOperationApply || mf.Subresource != "status" || mf.FieldsV1 == nil {
			continue
		}
		var fs struct {
			Status struct {
				Conditions map[string]json.RawMessage `json:"f:conditions"`
			} `json:"f:status"`
		}
		if err := json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fs); err != nil {
			return fmt.Errorf("status of %s: reading managed fields: %w", w.cfg.Resource.GroupResource(), err)
		}
		for k := range fs.Status.Conditions {
			var entry map[string]any
			if v, ok := strings.CutPrefix(k, "k:"); ok && json.Unmarshal([]byte(v), &entry) == nil &&
				len(entry) == 1 && entry["type"] == w.cfg.ConditionType {
				return nil
			}
		}
		if len(fs.Status.Conditions) == 0 {
			return unfit("is an atomic list")
		}
		return unfit("is a map list keyed by more than type")
	}
	return unfit("is not tracked as this field manager's")
}

// checked records the outcome of a check.
func (w *statusWriter[T, Obj]) checked(r writeResult[Obj]) {
	ks := w.state(r.key)
	ks.inflight = false
	w.checking = false
	w.dirty[r.key] = struct{}{}
	now := time.Now()
	switch {
	case r.err == nil && r.unfit == nil:
		w.fit, w.fitErr, w.checkAttempts = true, nil, 0
	case r.unfit != nil:
		if w.fitErr == nil || w.fitErr.Error() != r.unfit.Error() {
			w.log.Warn("status cannot be written", "error", r.unfit)
		}
		w.fitErr = r.unfit
		w.checkAttempts++
		w.checkAt = now.Add(w.nextBackoff(w.checkAttempts))
	case apierrors.IsNotFound(r.err):
		// The object went away meanwhile: check with the next one.
		delete(w.dirty, r.key)
	default:
		w.fitErr = w.writeError(r.key, r.err)
		w.checkAttempts++
		w.checkAt = now.Add(w.nextBackoff(w.checkAttempts))
	}
	w.reportHealth()
}
