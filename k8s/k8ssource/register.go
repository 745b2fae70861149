package k8ssource

import (
	"fmt"
	"slices"

	"github.com/cilium/hive/job"

	"github.com/converge-go/converge/source"
)

// Config describes a Kubernetes source: the resource, how an object
// becomes the table's objects, and optionally the status written back.
type Config[T Object, Obj comparable] struct {
	// Client lists and watches the resource (Dynamic or Typed). Required.
	Client Client[T]

	// ListerWatcherOptions: selectors, page size, streaming lists.
	ListerWatcherOptions

	// Transform turns one Kubernetes object into the table's objects; an
	// error is reported on the object's key (health, source/status, and
	// its Reconciled condition when Status is set), and the object keeps
	// the table objects it had. It runs concurrently during a list.
	// With Status, an object that yields a table object whose primary
	// key another of the source's objects holds is refused that one
	// (ReasonConflict): the first to ask holds a key until its claim is
	// cleaned up, then the next one gets it (claims.go,
	// docs/kubernetes.md). Required.
	Transform func(obj T) ([]Obj, error)

	// Status, when set, writes each object's reconciliation status back
	// to it as a Reconciled condition; see StatusConfig.
	Status *StatusConfig[T, Obj]

	// Finalizer, when set, holds each object until the Deletes of its
	// table objects have succeeded; see FinalizerConfig. It needs Status.
	Finalizer *FinalizerConfig[Obj]

	// Secondaries are the other resources Transform reads (NewSecondary):
	// each keeps a cache that Transform reads with Get, and a change of
	// an object there has the source read again the objects that read
	// it.
	Secondaries []SecondaryResource

	// Source is the rest of the source's configuration: Name, Table,
	// Equal, Pending, Owns, buffer, resync and metrics. ListerWatcher and
	// Transform are set by New. Resync stays off by default: a watch that
	// loses its place says so (410 Gone), and the source lists again. An
	// API server sends a bookmark on an idle watch about once a minute,
	// so a StaleAfter of a few minutes notices a connection that went
	// silent.
	Source source.Config[T, Obj]
}

// Register builds a Kubernetes source (and its status writer) and adds
// them to the hive module of p; see New.
func Register[T Object, Obj comparable](cfg Config[T, Obj], p source.Params) error {
	_, err := New(cfg, p)
	return err
}

// New registers a Kubernetes source, and the job that writes status back
// when cfg.Status is set. Its errors wrap source.ErrInvalidConfig and name
// the field.
func New[T Object, Obj comparable](cfg Config[T, Obj], p source.Params) (source.Source, error) {
	switch {
	case cfg.Client.List == nil || cfg.Client.Watch == nil:
		return nil, fmt.Errorf("%w: Client.List and Client.Watch are required", source.ErrInvalidConfig)
	case cfg.Transform == nil:
		return nil, fmt.Errorf("%w: Transform is required", source.ErrInvalidConfig)
	case cfg.Finalizer != nil && cfg.Status == nil:
		return nil, fmt.Errorf("%w: Finalizer needs Status (its condition, its field manager)", source.ErrInvalidConfig)
	}
	if cfg.Finalizer != nil {
		if err := cfg.Finalizer.validate(); err != nil {
			return nil, err
		}
	}
	lw := NewListerWatcher(cfg.Client, cfg.ListerWatcherOptions)
	sc := cfg.Source
	sc.ListerWatcher = lw
	transform := cfg.Transform
	sc.Transform = func(_ string, obj T) ([]Obj, error) { return transform(obj) }
	var w *statusWriter[T, Obj]
	if cfg.Status != nil {
		var err error
		if w, err = newStatusWriter(*cfg.Status, &sc, p); err != nil {
			return nil, err
		}
		lw.observe = w.tracker
		w.reemit = lw.reemit
		w.tracker.reemit = lw.reemit
		sc.Transform = func(key string, obj T) ([]Obj, error) {
			if w.fin != nil && obj.GetDeletionTimestamp() != nil && hasFinalizer(obj, w.fin.cfg.Name) {
				return w.finalTransform(key, obj, transform), nil
			}
			objs, err := transform(obj)
			return w.tracker.transformed(key, obj, objs, err), err
		}
		if cfg.Finalizer != nil {
			w.fin = &finalizing[T, Obj]{cfg: *cfg.Finalizer, pending: sc.Pending, staged: map[Obj]struct{}{}}
			w.tracker.finalizer = cfg.Finalizer.Name
			sc.Pending = w.fin.pendingFor
		}
	}
	if err := bindSecondaries(lw, cfg.Secondaries); err != nil {
		return nil, err
	}
	src, err := source.New(sc, p)
	if err != nil {
		return nil, err
	}
	for _, s := range cfg.Secondaries {
		p.JobGroup.Add(job.OneShot("k8s-secondary-"+sc.Name+"-"+s.secondaryName(), s.run))
	}
	if w != nil {
		p.JobGroup.Add(job.OneShot("k8s-status-"+sc.Name, w.run))
	}
	return src, nil
}

// bindSecondaries has the secondaries read lw's objects again.
func bindSecondaries[T Object](lw *ListerWatcher[T], secondaries []SecondaryResource) error {
	if slices.Contains(secondaries, nil) {
		return fmt.Errorf("%w: Secondaries has a nil entry", source.ErrInvalidConfig)
	}
	if len(secondaries) == 0 {
		return nil
	}
	lw.primaries = &primaries[T]{reemit: lw.reemit, objs: map[string]T{}}
	for _, s := range secondaries {
		if err := s.bind(lw.primaries); err != nil {
			return err
		}
	}
	return nil
}
