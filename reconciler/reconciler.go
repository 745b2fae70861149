package reconciler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"

	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
)

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

// Explain implements Reconciler.
func (r *reconciler[Obj]) Explain(ctx context.Context, key []byte) (Explanation, error) {
	sess := r.session
	req := explainRequest{key: string(key), reply: make(chan Explanation, 1)}
	select {
	case sess.ask <- req:
	case <-sess.done:
		return Explanation{}, fmt.Errorf("%s: %w", r.id.DisplayName(), ErrNotRunning)
	case <-ctx.Done():
		if !sess.started.Load() {
			return Explanation{}, fmt.Errorf("%s: %w: %w", r.id.DisplayName(), ErrNotRunning, ctx.Err())
		}
		return Explanation{}, ctx.Err()
	}
	select {
	case e := <-req.reply:
		return e, nil
	case <-ctx.Done():
		return Explanation{}, ctx.Err()
	}
}

// explainText answers Explain for a key given as text: the table's own
// string form of its primary key (as db/show takes it), the key's bytes,
// or the hex form printableKey shows for keys that are not printable.
func (r *reconciler[Obj]) explainText(ctx context.Context, text string) (Explanation, error) {
	key := []byte(text)
	if name := primaryIndexName(r.primary); name != "" {
		txn := r.db.ReadTxn()
		if obj, _, found, err := (statedb.AnyTable{Meta: r.cfg.Table}).Get(txn, name, text); err == nil && found {
			if k, ok := r.primary.ObjectToKey(obj.(Obj)); ok {
				key = k
			}
		}
	}
	return r.Explain(ctx, key)
}

// primaryIndexName is the name of the table's primary index, when its
// indexer is a statedb.Index (a struct with a Name field); else "".
func primaryIndexName(ix any) string {
	v := reflect.ValueOf(ix)
	if v.Kind() != reflect.Struct {
		return ""
	}
	if f := v.FieldByName("Name"); f.IsValid() && f.Kind() == reflect.String {
		return f.String()
	}
	return ""
}
