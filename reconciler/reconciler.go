// Package reconciler makes the outside world match a statedb table.
//
// Desired objects live in a statedb table and carry a Status in a named
// field (a StatusSet when several reconcilers serve one object). You
// write the Operations that change the target; New (or Register, from a
// cell.Invoke) builds a Reconciler from a Config and the hive's Params,
// and runs it as a job of its module: it calls your operations until the
// target matches and records each object's outcome in its status.
//
// The names a program needs:
//
//	Config, New, Register, Params, Cell   build and register a reconciler
//	Operations, BatchOperations           a target taking one object (or one round) at a time
//	SyncOperations, Change, FailObjects   a target taking the whole desired set at once
//	Status, StatusKind, StatusSet         the status an object carries, by reconciler
//	StatusPending, StatusUnset            what a writer sets on every change
//	Permanent, RetryAfter                 what an operation returns to steer its retries
//	Reconciler                            the running reconciler: WaitUntilSettled,
//	                                      Explain (why is this key not Done?), Status
//	WaitForReconciliation                 wait until a table's objects are Done
//	Off                                   turn a periodic interval off
//
// The rest is for tuning (the fields of Config, Debounce), observing
// (Metrics, StatusSnapshot, Explanation), replicas (Ownership) and
// serialization.
//
// # The writer's contract
//
// Every object inserted or changed must be written with StatusPending()
// (StatusSet.Pending for several reconcilers), or StatusUnset() to keep it
// from the target for now. An object written with the Done it was copied
// with is not reconciled: the table shows the new value, the target keeps
// the old one. (The reconciler notices it where that is certain: it
// counts and logs it, and Explain says it.) Deleting an object from the
// table makes the reconciler Delete it from the target.
//
// Register an initializer on the table (Table.RegisterInitializer) and
// mark it done once the desired set is complete: until then nothing is
// pruned, and a whole-set target is not synced. A table on which no
// initializer was ever registered counts as initialized at once; for it,
// the first prune waits for the first write or InitialPruneDelay.
//
// # How a change flows
//
// The reconciler's loop reads the table's changes in revision order,
// deletes included. A change that asks for work becomes a request, at
// most Config.RoundSize outstanding at once, rounds paced by
// Config.RoundRateLimiter. Requests run on up to Config.Concurrency
// workers, on a clone of the object, never two for one primary key. The
// results of a step are committed in one write transaction; a status is
// written only while this reconciler's status in the object is still the
// one the request read, so a stale result never overwrites a newer
// change. Success marks the object Done; failure marks it Error and
// retries it with jittered exponential backoff, unless the error is
// Permanent or MaxRetries is spent (given up on until the object changes
// or refresh comes). Full reconciliation hands Prune every desired object
// once the table is initialized and every FullReconciliationInterval;
// refresh marks an object Refreshing once it has been Done (or given up
// on) for RefreshInterval, so that Update repairs drift.
//
// A target that takes the entire desired state at once (an nftables
// ruleset, a reloaded config file) is given Config.SyncOperations instead:
// changes are debounced (Config.SyncDebounce), one Sync at a time gets
// every desired object of one snapshot, and its result is written into
// every object that asked, with the same retries, health and waits.
//
// # Guarantees
//
//   - Nothing is lost: every desired object ends Done once the target
//     accepts it, and every deleted object gets a successful Delete (or is
//     removed by the next successful Prune).
//   - No status is written and no operation started after the hive stops;
//     operations in flight see a cancelled context. Stop returns by its
//     deadline (with OperationTimeout, within it and 100ms of the stop),
//     giving up on, and logging, an operation that ignores its context.
//   - An operation that panics, errs or hangs harms only its own object:
//     panics are recovered (ErrPanic); past OperationTimeout an attempt
//     counts as failed (ErrTimeout) whether or not it returns, and a worker
//     stuck there is replaced. An operation that ignores its context may
//     still act on the target until it returns: its result is discarded,
//     and no other operation on its key starts before it returns.
//   - The waits never return early, and return an error (not nil) while a
//     misconfiguration keeps objects from being reconciled. Two
//     reconcilers that would share one status are refused at New.
//   - Bad configuration fails New with an error wrapping ErrInvalidConfig
//     that names the field.
//   - Work per round is proportional to what changed, not to the table.
//
// # Observing and testing
//
// Health is reported through the hive's job health; Status returns a
// snapshot; Explain says where one key stands and why; Metrics (see
// package metrics) receives counters, histograms and gauges. Cell adds a
// registry and the reconciler/status, explain, full, wait, suspend and
// resume script commands. Tests wait with WaitUntilSettled,
// WaitUntilReconciled or WaitForReconciliation (with index.NewStatusIndex),
// never with sleeps; the engine runs inside a testing/synctest bubble.
//
// How the engine is built, stage by stage, is in CONTRIBUTING.md.
package reconciler

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/cilium/hive/cell"
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
	if err := cfg.requiresIn(p.DB); err != nil {
		return nil, err
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
		log:         log.With("reconciler", id.DisplayName(), "table", cfg.Table.Name()),
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
	r.obs = newObserving(&cfg, r.log, r.metrics)
	r.initializerAtNew = len(cfg.Table.PendingInitializers(p.DB.ReadTxn())) > 0
	if p.Registry != nil {
		if err := p.Registry.add(id, r, accessorOf(id.DisplayName(), cfg)); err != nil {
			return nil, err
		}
		r.registry, r.regName = p.Registry, id.DisplayName()
	}
	if p.Lifecycle != nil {
		p.Lifecycle.Append(&r.stopping)
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

// Reconciler is a running reconciler for one table. New and Register return
// it; the work itself runs as a job of the module's job group.
type Reconciler[Obj any] interface {
	// TriggerFullReconciliation asks for a full reconciliation (Prune, then
	// refresh of stale objects; with SyncOperations, a Sync) as soon as the
	// table is initialized and the in-flight operations have finished. Calls made while one is already
	// requested are folded into it.
	TriggerFullReconciliation()

	// Suspend stops the reconciler from starting operations: operations in
	// flight finish and their results are committed, nothing new starts,
	// and health reports the reconciler as suspended. Changes made
	// meanwhile are all reconciled after Resume. Use it, with
	// Config.StartSuspended, to reconcile only while leading.
	Suspend()

	// Resume undoes Suspend. It does nothing when not suspended.
	Resume()

	// Status returns a snapshot of what the reconciler is doing: counts by
	// status, retries, operations in flight, the last round and full
	// reconciliation, and recent errors. It costs O(1).
	Status() StatusSnapshot

	// WaitUntilReconciled blocks until every change to the table up to rev
	// has been attempted at least once, or ctx ends: then it returns an
	// error wrapping ctx.Err() that names the oldest change outstanding
	// and where its key stands (as Explain says). A misconfiguration that
	// keeps objects from being reconciled is returned at once (wrapping
	// ErrInvalidConfig). It returns the revision up to which changes have been
	// attempted and the retry low watermark: the lowest revision of a change
	// that failed and waits for a retry, or reconciled+1 when nothing waits.
	// Everything up to rev reconciled successfully when reconciled >= rev
	// and retryLowWatermark > rev.
	WaitUntilReconciled(ctx context.Context, rev statedb.Revision) (reconciled, retryLowWatermark statedb.Revision, err error)

	// WaitUntilSettled blocks until every change up to rev has settled:
	// reconciled successfully, or given up on (a Permanent error, or
	// MaxRetries spent), with no retry pending for it. Deletes included.
	// If ctx ends first it returns an error wrapping ctx.Err() that names
	// the oldest change outstanding, its failures and last error, and
	// where its key stands (as Explain says); a misconfiguration that keeps
	// objects from being reconciled is returned at once (wrapping
	// ErrInvalidConfig). Tests use
	// it after changing the table: table.Revision(db.ReadTxn()) is the
	// revision to wait for.
	WaitUntilSettled(ctx context.Context, rev statedb.Revision) error

	// WaitUntilPruned blocks until a full reconciliation's Prune (whole
	// set: a Sync) has succeeded that saw every change up to rev: the
	// target has been rid of what was not desired then. A Prune this
	// replica skipped (another holds the whole set's claim) does not
	// count. If ctx ends first it returns an error wrapping ctx.Err() that
	// says how far pruning got, and why when the last Prune failed; a
	// misconfiguration is returned at once. Tests use it with
	// TriggerFullReconciliation, or to wait for the first Prune after
	// start.
	WaitUntilPruned(ctx context.Context, rev statedb.Revision) error

	// Explain says where the object with primary key key stands for this
	// reconciler, and why it is not Done: its KeyState and since when,
	// the revision that asked, attempts, the last error, the next retry
	// or refresh and why. It answers as of the loop's latest step, asking
	// the loop; ctx bounds the wait for the answer. Before the hive has
	// started the loop, Explain waits for it; when ctx ends first, the
	// error wraps ErrNotRunning and ctx's error. After the loop stopped,
	// it returns an error wrapping ErrNotRunning at once.
	Explain(ctx context.Context, key []byte) (Explanation, error)
}

// Params are what every reconciler takes from the hive. Embed them, or take
// them as a parameter of a cell.Invoke function, and pass them to New or
// Register.
//
// The hive must have statedb.Cell and job.Cell, and the reconciler's module
// must provide its job group, the one thing users tend to forget:
//
//	cell.Module("routes", "Routes",
//		cell.ProvidePrivate(job.Registry.NewGroup),
//		cell.Invoke(registerRouteReconciler),
//	)
type Params struct {
	cell.In

	Log      *slog.Logger
	DB       *statedb.DB
	JobGroup job.Group
	ModuleID cell.FullModuleID

	// DefaultMetrics is used by reconcilers whose Config.Metrics is nil.
	// metrics.Cell provides it.
	DefaultMetrics Metrics `optional:"true"`

	// Registry, provided by Cell, makes the reconciler visible to the
	// reconciler/... script commands.
	Registry *Registry `optional:"true"`

	// Lifecycle, which the hive provides, tells the reconciler the stop
	// deadline: a stopping reconciler waits for an operation that ignores
	// its context until a little before it, and no longer.
	Lifecycle cell.Lifecycle `optional:"true"`
}

// Register constructs a reconciler and adds it to the module's job group.
// Use it from cell.Invoke when nothing needs the Reconciler value:
//
//	cell.Invoke(func(p reconciler.Params, t statedb.RWTable[*Route], ops *routeOps) error {
//		return reconciler.Register(reconciler.Config[*Route]{Table: t, ...}, p)
//	})
func Register[Obj comparable](cfg Config[Obj], p Params) error {
	_, err := New(cfg, p)
	return err
}

// Status implements Reconciler.
func (r *reconciler[Obj]) Status() StatusSnapshot {
	if snap, ok := r.snapshot.load(); ok {
		// Suspend and Resume take effect at once; say so at once too.
		snap.Suspended = r.suspended()
		// Summarized when asked, not after every round: it sorts.
		snap.Realization = r.realized.info()
		if !snap.oldestSince.IsZero() {
			snap.OldestWaiting = max(time.Since(snap.oldestSince), 0)
		}
		return snap
	}
	return StatusSnapshot{
		Module:      r.id.ModuleID,
		Name:        r.cfg.Name,
		Table:       r.cfg.Table.Name(),
		Suspended:   r.suspended(),
		Realization: r.realized.info(),
	}
}
