package reconciler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
)

// reconciler is the Reconciler handed to users. Its loop runs as a job of
// the module's job group; the fields here are shared with that loop.
type reconciler[Obj comparable] struct {
	cfg      Config[Obj]
	log      *slog.Logger
	db       *statedb.DB
	primary  statedb.Indexer[Obj]
	metrics  ReconcilerMetrics
	id       ReconcilerID
	progress *progress

	// triggerFull carries TriggerFullReconciliation requests to the loop.
	// Capacity one: requests made while one is queued fold into it.
	triggerFull chan struct{}

	// paused is set while suspended; wake tells the loop it changed.
	paused atomic.Bool
	wake   chan struct{}

	// snapshot is the latest StatusSnapshot, published by the loop.
	snapshot atomic.Pointer[StatusSnapshot]

	// pointerObjects is set when Obj is a pointer type, where a clone that
	// equals its original is the original itself.
	pointerObjects bool

	// realized holds the latest realization latencies, for Status().
	realized realizationWindow

	// initializerAtNew is set when the table had a pending initializer
	// when New ran: one that completes before the loop starts leaves no
	// trace the loop could see (feed.noInitializer).
	initializerAtNew bool

	// registry and name are where the loop looks for other reconcilers on
	// the same table (shared.go); shared is the conflict it found, owned
	// by the loop goroutine.
	registry *Registry
	regName  string
	shared   sharedCheck

	// session is how Explain reaches the loop.
	session *loopSession
}

var _ Reconciler[struct{}] = (*reconciler[struct{}])(nil)

// New validates cfg, fills in the defaults and adds the reconciler's loop to
// p.JobGroup; the loop starts with the hive. It fails, with an error that
// wraps ErrInvalidConfig and names the field, when cfg is not usable.
func New[Obj comparable](cfg Config[Obj], p Params) (Reconciler[Obj], error) {
	if err := cfg.validateShape(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	switch {
	case p.DB == nil:
		return nil, fmt.Errorf("%w: Params.DB is required", ErrInvalidConfig)
	case p.JobGroup == nil:
		return nil, fmt.Errorf("%w: Params.JobGroup is required", ErrInvalidConfig)
	}
	log := p.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	metrics := cfg.Metrics
	if metrics == nil {
		metrics = p.DefaultMetrics
	}
	if metrics == nil {
		metrics = NopMetrics{}
	}
	id := ReconcilerID{ModuleID: p.ModuleID.String(), Name: cfg.Name}
	r := &reconciler[Obj]{
		cfg:         cfg,
		log:         log.With("reconciler", cfg.Name, "table", cfg.Table.Name()),
		db:          p.DB,
		primary:     cfg.Table.PrimaryIndexer(),
		metrics:     metrics.Reconciler(id),
		id:          id,
		progress:    newProgress(),
		triggerFull: make(chan struct{}, 1),
		wake:        make(chan struct{}, 1),
		session:     newLoopSession(),

		pointerObjects: reflect.TypeFor[Obj]().Kind() == reflect.Pointer,
	}
	r.paused.Store(cfg.StartSuspended)
	r.initializerAtNew = len(cfg.Table.PendingInitializers(p.DB.ReadTxn())) > 0
	if p.Registry != nil {
		if err := p.Registry.add(id, r, accessorOf(id.DisplayName(), cfg)); err != nil {
			return nil, err
		}
		r.registry, r.regName = p.Registry, id.DisplayName()
	}
	p.JobGroup.Add(job.OneShot(r.jobName(), r.run))
	return r, nil
}

// jobName is the job's name, and so its health scope: "reconcile" or
// "reconcile-<name>".
func (r *reconciler[Obj]) jobName() string {
	if r.cfg.Name == "" {
		return "reconcile"
	}
	return "reconcile-" + r.cfg.Name
}

// TriggerFullReconciliation implements Reconciler.
func (r *reconciler[Obj]) TriggerFullReconciliation() {
	select {
	case r.triggerFull <- struct{}{}:
	default:
	}
}

// Suspend implements Reconciler.
func (r *reconciler[Obj]) Suspend() {
	if !r.paused.Swap(true) {
		r.poke()
	}
}

// Resume implements Reconciler.
func (r *reconciler[Obj]) Resume() {
	if r.paused.Swap(false) {
		r.poke()
	}
}

func (r *reconciler[Obj]) suspended() bool { return r.paused.Load() }

// poke wakes the loop without blocking.
func (r *reconciler[Obj]) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// WaitUntilReconciled implements Reconciler.
func (r *reconciler[Obj]) WaitUntilReconciled(ctx context.Context, rev statedb.Revision) (statedb.Revision, statedb.Revision, error) {
	v, err := r.progress.waitUntil(ctx, func(v progressValues) bool { return v.reconciled >= rev })
	if err != nil && v.blocked != nil && errors.Is(err, v.blocked) {
		err = fmt.Errorf("%s: %w", r.id.DisplayName(), err)
	}
	return v.reconciled, v.retryLow, err
}

// WaitUntilSettled implements Reconciler.
func (r *reconciler[Obj]) WaitUntilSettled(ctx context.Context, rev statedb.Revision) error {
	v, err := r.progress.waitUntil(ctx, func(v progressValues) bool {
		return v.reconciled >= rev && v.retryLow > rev
	})
	if err != nil {
		return fmt.Errorf("%s not settled: %s: %w", r.id.DisplayName(), v.describe(rev), err)
	}
	return nil
}

// waitSettled waits until every change made before the call has settled.
func (r *reconciler[Obj]) waitSettled(ctx context.Context) error {
	return r.WaitUntilSettled(ctx, r.cfg.Table.Revision(r.db.ReadTxn()))
}

// run is the job: it runs the loop of the target's shape until ctx ends.
func (r *reconciler[Obj]) run(ctx context.Context, health cell.Health) error {
	sess := r.session
	sess.started.Store(true)
	defer close(sess.done)
	if r.cfg.SyncOperations != nil {
		return newSyncLoop(r, health).run(ctx, sess.ask)
	}
	return newLoop(r, health).run(ctx, sess.ask)
}

// keyOf returns obj's primary key as a string without copying it: statedb
// keys are never mutated once made, so viewing the bytes as a string is safe.
//
// An object without a primary key yields "". statedb stores no such object
// (since v0.9 its insert of one is a no-op), so every object the loops read
// from the table has a key; the one place a keyless object can appear is
// what Config.SetObjectStatus returns, and the status write checks that
// (writeKeyChanged), reporting it as a misconfiguration on the object.
func (r *reconciler[Obj]) keyOf(obj Obj) string {
	k, _ := r.primary.ObjectToKey(obj)
	return unsafe.String(unsafe.SliceData(k), len(k))
}

// queryOf returns the primary-key query for obj (see keyOf).
func (r *reconciler[Obj]) queryOf(obj Obj) statedb.Query[Obj] {
	q, _ := r.primary.QueryFromObject(obj)
	return q
}
