package reconciler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	"golang.org/x/time/rate"
)

// The engine's shared part: the reconciler every loop runs for, what it
// knows of the objects (keys, clones, statuses), and how a run reads the
// table (feed). The stages of a request's life: request.go (the request
// table's structure) and table.go (its transitions), loop.go and
// syncloop.go (the two loops), execute.go and batch.go (operations),
// commitjob.go, commit.go, statuswrite.go and failure.go (what a result
// does), report.go (what is published).
//
// Who owns what: the loop goroutine owns the request table and every
// report derived from it. Workers, the committer goroutine and a Sync's
// goroutine are handed values (a task, a commit's writes, a syncRun) and
// hand values back; the timerfd's goroutine only signals. Status() reads
// an atomic pointer, the waits a mutex-held value and its channel.

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
	snapshot snapshotBox

	// pointerObjects is set when Obj is a pointer type, where a clone that
	// equals its original is the original itself.
	pointerObjects bool

	// realized holds the latest realization latencies, for Status().
	realized realizationWindow

	// initializerAtNew is set when the table had a pending initializer
	// when New ran: one that completes before the loop starts leaves no
	// trace the loop could see (feed.noInitializer).
	initializerAtNew bool

	// registry and regName are where the loop looks for other reconcilers
	// on the same table; shared is the conflict it found (loop-owned).
	registry *Registry
	regName  string
	shared   sharedCheck

	// session is how Explain reaches the loop.
	session *loopSession

	// stopping learns the hive's stop context (stop.go).
	stopping stopHook

	// unreconciled remembers the latest unreconciled writes, for Explain
	// (loop-owned); unreconciledLog paces their log lines.
	unreconciled    unreconciledWrites
	unreconciledLog *rate.Limiter

	obs *observing[Obj] // Config.Observers (observe_engine.go); nil without
}

var _ Reconciler[struct{}] = (*reconciler[struct{}])(nil)

// run is the job: it runs the loop of the target's shape until ctx ends.
func (r *reconciler[Obj]) run(ctx context.Context, health cell.Health) error {
	sess := r.session
	sess.started.Store(true)
	defer close(sess.done)
	defer r.enlist()()
	if r.cfg.SyncOperations != nil {
		return newSyncLoop(r, health).run(ctx, sess.ask)
	}
	return newLoop(r, health).run(ctx, sess.ask)
}

// newRequests returns the request table of a loop of this reconciler.
func (r *reconciler[Obj]) newRequests(dispatch bool) *requests[Obj] {
	return newRequests(dispatch, r.keyOf, r.cfg.GetObjectStatus, r.checkShared)
}

// keyOf returns obj's primary key as a string without copying it: statedb
// keys are never mutated once made, so viewing the bytes as a string is
// safe. An object without a primary key yields "": statedb stores none
// (since v0.9 its insert is a no-op), so the one place one can appear is
// what SetObjectStatus returns, and the status write checks that.
func (r *reconciler[Obj]) keyOf(obj Obj) string {
	k, _ := r.primary.ObjectToKey(obj)
	return unsafe.String(unsafe.SliceData(k), len(k))
}

// queryOf returns the primary-key query for obj (see keyOf).
func (r *reconciler[Obj]) queryOf(obj Obj) statedb.Query[Obj] {
	q, _ := r.primary.QueryFromObject(obj)
	return q
}

// getByKey looks the object with primary key key up in txn.
func (r *reconciler[Obj]) getByKey(txn statedb.ReadTxn, key string) (Obj, statedb.Revision, bool) {
	if q, ok := r.primary.(interface {
		QueryFromKey(index.Key) statedb.Query[Obj]
	}); ok {
		return r.cfg.Table.Get(txn, q.QueryFromKey(index.Key(key)))
	}
	for obj, rev := range r.cfg.Table.All(txn) { // an indexer of another kind: rare, and Explain only
		if r.keyOf(obj) == key {
			return obj, rev, true
		}
	}
	var zero Obj
	return zero, 0, false
}

// keyBytes is key's bytes, without a copy.
func keyBytes(key string) []byte { return unsafe.Slice(unsafe.StringData(key), len(key)) }

// ownsKey reports whether this replica owns key (always, without
// Config.Ownership). It reads only the Config: status writes ask it on the
// committer goroutine too.
func (r *reconciler[Obj]) ownsKey(key string) bool {
	own := r.cfg.Ownership
	return own == nil || own.Owns(keyBytes(key))
}

// clone copies obj for an operation or a status write. A CloneObject that
// returns the object itself (for pointer types) would let the operation
// and the status write mutate an object the table's snapshots share.
func (r *reconciler[Obj]) clone(obj Obj) (Obj, error) {
	c := r.cfg.CloneObject(obj)
	if r.pointerObjects && c == obj {
		var zero Obj
		return zero, errCloneItself
	}
	return c, nil
}

var errCloneItself = fmt.Errorf("%w: Config.CloneObject returned the object itself; it must return a copy", ErrInvalidConfig)

// shallowCopy copies the object a pointer points to, for writing the
// status that says CloneObject is broken: the object must not stay
// Pending while Status() and health say it failed.
func shallowCopy[Obj any](obj Obj) (Obj, bool) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return obj, false
	}
	c := reflect.New(v.Type().Elem())
	c.Elem().Set(v.Elem())
	return c.Interface().(Obj), true
}

// classify maps an operation's error to its metrics result. failures is
// the object's consecutive failures before this attempt, or -1 for a prune,
// which has no retry budget.
func (r *reconciler[Obj]) classify(err error, failures int) Result {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, ErrInvalidConfig):
		return ResultPermanent
	case isDeferral(err):
		return ResultDeferred
	case errors.Is(err, ErrPanic):
		return ResultPanic
	case IsPermanent(err):
		return ResultPermanent
	case r.cfg.MaxRetries > 0 && failures >= 0 && failures+1 >= r.cfg.MaxRetries:
		return ResultExhausted
	case errors.Is(err, ErrTimeout):
		return ResultTimeout
	default:
		return ResultError
	}
}

// failure says why an attempt that failed with err after failures
// earlier ones is given up on (whyNone: it is retried), and wraps err for
// the status.
func (r *reconciler[Obj]) failure(err error, failures int) (reqWhy, error) {
	switch {
	case errors.Is(err, ErrInvalidConfig):
		return whyMisconfigured, err
	case errors.Is(err, ErrDependencyCycle):
		return whyCycle, err
	case IsPermanent(err):
		return whyPermanent, err
	case r.cfg.MaxRetries > 0 && failures+1 >= r.cfg.MaxRetries:
		return whyExhausted, fmt.Errorf("%w after %d attempts: %w", ErrRetriesExhausted, failures+1, err)
	}
	return whyNone, err
}

// resultRank orders results from best to worst, for reporting a batch by
// its worst entry.
var resultRank = [...]Result{ResultOK, ResultDeferred, ResultError, ResultTimeout, ResultPermanent, ResultExhausted, ResultPanic}

func rankOf(r Result) int {
	for i, x := range resultRank {
		if x == r {
			return i
		}
	}
	return len(resultRank) - 1
}

// feed is how a run reads the table, for both loops: the change iterator,
// the watch channels and the revision the run began at.
type feed[Obj any] struct {
	changes statedb.ChangeIterator[Obj]
	// changesWatch closes when the table has changes not read yet;
	// initWatch when the table is initialized.
	changesWatch <-chan struct{}
	initWatch    <-chan struct{}
	initialized  bool
	// startRev is the table's revision when this run began: an Error
	// status at or below it was left by an earlier run, whose retries are
	// gone; the objects at or below it were there before the run.
	startRev statedb.Revision
	// readTo is the last revision the change iterator returned: the waits
	// never claim more than was read. readAll is set once every change
	// present when the run began has been read.
	readTo  statedb.Revision
	readAll bool
	// noInitializer is set when, as the run began, nobody had registered
	// an initializer on the table and nothing had been written to it: the
	// table counts as initialized, but its desired set may still be to
	// come.
	noInitializer bool
	warned        bool      // the wait for a first write has been logged
	openedAt      time.Time // when the run began
}

// open starts reading table's changes. The first read is due at once
// (changesWatch is closed). The initialization is read now rather than
// only through initWatch: in a loop's select a ready change can win over
// a ready init channel, and the first prune or Sync would start late. It
// returns the snapshot at startRev: the table as the run began.
func (f *feed[Obj]) open(db *statedb.DB, table statedb.RWTable[Obj], initializerAtNew bool) (statedb.ReadTxn, error) {
	wtxn := db.WriteTxn(table)
	changes, err := table.Changes(wtxn)
	txn := wtxn.Commit()
	if err != nil {
		return nil, fmt.Errorf("watching %s for changes: %w", table.Name(), err)
	}
	f.changes = changes
	f.startRev = table.Revision(txn)
	f.initialized, f.initWatch = table.Initialized(txn)
	f.noInitializer = !initializerAtNew && f.startRev == 0 && len(table.PendingInitializers(txn)) == 0
	f.openedAt = time.Now()
	f.changesWatch = closedCh
	return txn, nil
}

// markRead moves the read mark once a read of the iterator ended. The
// first read covers the table as it was when the run began (deletes from
// before the run left no change to read, and the table's revision may be
// theirs); after it, the mark moves only with what the iterator returns:
// statedb publishes a commit's data before it closes the watch channels,
// and a read in that window returns nothing although the snapshot holds
// the change.
func (f *feed[Obj]) markRead(complete bool) {
	if complete && !f.readAll {
		f.readAll = true
		f.readTo = max(f.readTo, f.startRev)
	}
}

// desiredComplete reports whether the desired set is complete enough to
// remove what is not in it (Prune, a Sync): the table is initialized and,
// when no initializer was pending at New nor as the run began, it has been
// written to, or InitialPruneDelay has passed since the run began.
// Otherwise it returns how long to wait. A program that inserts its
// desired objects only after start, without an initializer, would
// otherwise have its target wiped by the first prune.
func (f *feed[Obj]) desiredComplete(db *statedb.DB, table statedb.Table[Obj], delay time.Duration, log *slog.Logger) (bool, time.Duration) {
	if !f.initialized {
		return false, 0
	}
	if !f.noInitializer {
		return true, 0
	}
	if table.Revision(db.ReadTxn()) > 0 || delay == Off {
		f.noInitializer = false
		return true, 0
	}
	if wait := delay - time.Since(f.openedAt); wait > 0 {
		if !f.warned {
			f.warned = true
			log.Warn("Nothing is pruned until the first write to the table, or InitialPruneDelay: it has no pending initializer. "+
				"Register one with RegisterInitializer and mark it done once the desired set is complete.", "delay", delay)
		}
		return false, wait
	}
	f.noInitializer = false
	return true, 0
}

// closedCh is a channel that is always ready.
var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// rearm returns the channel to sleep on after a read of it that took
// every change up to txn and returned watch. statedb's change iterator
// returns a closed channel from every Next that yielded changes, and the
// channel that closes with the next commit only from the Next after: a
// loop that slept on the first would wake at once for a step that reads
// nothing, and on a lone change that step runs before the worker the
// change was handed to. So when watch is closed, ask again now, at the
// same txn: it yields nothing new, and returns the closed channel again
// only if a commit came since txn, which is then still to be read.
func rearm[Obj any](it statedb.ChangeIterator[Obj], txn statedb.ReadTxn, watch <-chan struct{}) <-chan struct{} {
	if !isClosed(watch) {
		return watch
	}
	_, watch = it.Next(txn)
	return watch
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// sharedCheck is a loop's runtime check for a status shared with another
// reconciler on its table, for accessors the Registry could not probe at
// New (they panic on a zero object). It costs one branch per change once
// done.
type sharedCheck struct {
	others []statusAccessor // the other reconcilers on the table, as the loop began
	done   bool
	err    error // the conflict found, for health
}

// start takes the other reconcilers registered on table.
func (c *sharedCheck) start(reg *Registry, name, table string) {
	*c = sharedCheck{done: true}
	if reg == nil {
		return
	}
	c.others = reg.others(name, table)
	c.done = len(c.others) == 0
}

// checkShared looks at obj, whose status as this reconciler reads it is
// st, while the check is not done. A Done or Error with a time was
// written by a reconciler at its own moment: another reconciler that
// reads exactly it from obj shares the status. One such object settles
// the question either way.
func (r *reconciler[Obj]) checkShared(obj Obj, st Status) {
	c := &r.shared
	if c.done || st.Kind != StatusKindDone && st.Kind != StatusKindError || st.UpdatedAt.IsZero() {
		return
	}
	c.done = true
	for _, other := range c.others {
		if got, ok := other.get(obj); ok && got.Kind == st.Kind && got.UpdatedAt.Equal(st.UpdatedAt) && got.Error == st.Error && got.ID == st.ID {
			c.err = sharedStatusError(other.name, r.regName, r.cfg.Table.Name())
			r.log.Error("Reconciler misconfigured; objects are silently left unreconciled", "error", c.err)
			return
		}
	}
}

// perObject splits a Sync's error into the failures of single objects
// (FailObjects), by primary key, and the error of the whole Sync.
func (r *reconciler[Obj]) perObject(err error) (objects map[string]ObjectFailure[Obj], whole error) {
	var of *objectFailures[Obj]
	if err == nil || !errors.As(err, &of) {
		return nil, err
	}
	objects = make(map[string]ObjectFailure[Obj], len(of.failures))
	for _, f := range of.failures {
		if f.Err == nil {
			f.Err = errors.New("failed")
		}
		objects[r.keyOf(f.Object)] = ObjectFailure[Obj]{Object: f.Object, Err: safeErr(OpSync, f.Err)}
	}
	return objects, nil
}

// errString is err's message, or "" for nil.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
