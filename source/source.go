package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
)

// Params are what every source takes from the hive. The hive needs
// statedb.Cell and job.Cell, and the source's module must provide its job
// group (cell.ProvidePrivate(job.Registry.NewGroup)).
type Params struct {
	cell.In

	Log      *slog.Logger
	DB       *statedb.DB
	JobGroup job.Group
	ModuleID cell.FullModuleID

	// DefaultMetrics is used by sources whose Config.Metrics is nil.
	DefaultMetrics Metrics `optional:"true"`

	// Registry, provided by Cell, makes the source visible to the
	// source/status command.
	Registry *Registry `optional:"true"`
}

// Source is a running source. New returns it; the work runs as a job of
// the module's job group, from the hive's start to its stop.
type Source interface {
	// Status returns a snapshot of what the source is doing.
	Status() StatusSnapshot

	// Resync asks for a relist as soon as the current watch can be
	// stopped; calls made meanwhile are folded into one.
	Resync()

	// InitializeAnyway marks the table initialized although some listed
	// items have never been read successfully (see Config.InitTimeout),
	// with a warning in the log and in Status. The reconciler may then
	// prune the objects those items yielded before the process started.
	// It does nothing once the table is initialized.
	InitializeAnyway()
}

// Register constructs a source and adds it to the module's job group. Use
// it from cell.Invoke when nothing needs the Source value.
func Register[Item any, Obj comparable](cfg Config[Item, Obj], p Params) error {
	_, err := New(cfg, p)
	return err
}

// New validates cfg, registers the table initializer that the source's
// first list completes, and adds the source's job to p.JobGroup. It fails
// with an error wrapping ErrInvalidConfig for a bad Config or a name
// already used in the module.
func New[Item any, Obj comparable](cfg Config[Item, Obj], p Params) (Source, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	id := ID{ModuleID: p.ModuleID.String(), Name: cfg.Name}
	m := cfg.Metrics
	if m == nil {
		m = p.DefaultMetrics
	}
	var sm SourceMetrics = nopMetrics{}
	if m != nil {
		sm = m.Source(id)
	}
	s := &source[Item, Obj]{
		cfg:     cfg,
		id:      id,
		db:      p.DB,
		log:     p.Log.With("source", id.DisplayName()),
		metrics: sm,
		buf:     newBuffer[Item](cfg.BufferSize),
		resync:  make(chan struct{}, 1),
		initNow: make(chan struct{}, 1),
	}
	s.blocked.freed = make(chan struct{}, 1)
	s.w = newWriter(&s.cfg)
	s.status.snap = StatusSnapshot{Module: id.ModuleID, Name: id.Name, Table: cfg.Table.Name(), State: "stopped"}
	if p.Registry != nil {
		if err := p.Registry.add(id, s); err != nil {
			return nil, err
		}
	}
	initName := "source-" + id.DisplayName()
	wtxn := p.DB.WriteTxn(cfg.Table)
	if slices.Contains(cfg.Table.PendingInitializers(wtxn), initName) {
		wtxn.Abort()
		return nil, fmt.Errorf("%w: a source named %q already exists in module %q (table %s)", ErrInvalidConfig, id.Name, id.ModuleID, cfg.Table.Name())
	}
	s.initDone = cfg.Table.RegisterInitializer(wtxn, initName)
	wtxn.Commit()
	p.JobGroup.Add(job.OneShot("source-"+cfg.Name, s.run))
	return s, nil
}

type source[Item any, Obj comparable] struct {
	cfg      Config[Item, Obj]
	id       ID
	db       *statedb.DB
	log      *slog.Logger
	metrics  SourceMetrics
	buf      *buffer[Item]
	w        *writer[Item, Obj]
	initDone func(statedb.WriteTxn) // nil once called
	listed   bool                   // a list succeeded
	resync   chan struct{}
	initNow  chan struct{}
	initT    *time.Timer

	forceInit   bool   // initialize although items fail
	forceReason string // why

	healthMu sync.Mutex
	blocked  blockedWaiter
	status   tracker
	health   cell.Health
	backoff  time.Duration
}

var _ Source = (*source[int, int])(nil)

// Status implements Source.
func (s *source[Item, Obj]) Status() StatusSnapshot {
	snap := s.status.get()
	resume, pending, oldest := s.buf.state()
	snap.Resume, snap.Pending = resume, pending
	snap.LastContact = s.buf.lastContact()
	snap.UpdatedAt = time.Now()
	if !oldest.IsZero() {
		snap.Lag = snap.UpdatedAt.Sub(oldest)
	}
	return snap
}

// Resync implements Source.
func (s *source[Item, Obj]) Resync() { signal(s.resync) }

// run is the source's job: list, then watch, and list again whenever the
// watch cannot resume, until ctx ends.
func (s *source[Item, Obj]) run(ctx context.Context, health cell.Health) error {
	s.health = health
	s.status.update(func(st *StatusSnapshot) { st.StartedAt, st.StaleAfter = time.Now(), max(s.cfg.StaleAfter, 0) })
	defer s.status.update(func(st *StatusSnapshot) { st.State = "stopped" })
	defer func() {
		if s.initT != nil {
			s.initT.Stop()
		}
	}()
	defer s.blocked.stop()
	if s.cfg.StaleAfter > 0 {
		stopStale := s.watchStaleness(ctx)
		defer stopStale()
	}
	if c, ok := s.cfg.ListerWatcher.(io.Closer); ok {
		defer c.Close()
	}
	var resyncC <-chan time.Time
	resetResync := func() {}
	if s.cfg.Resync > 0 {
		t := time.NewTimer(s.cfg.Resync)
		defer t.Stop()
		resyncC = t.C
		resetResync = func() { t.Reset(s.cfg.Resync) }
	}
	reason := ReasonInitial
	for ctx.Err() == nil {
		listed := reason != ""
		if listed {
			s.buf.newSession(true)
			if err := s.relist(ctx, reason); err != nil {
				if ctx.Err() != nil {
					break
				}
				s.failed(StageList, err)
				reason = ReasonRetry
				s.wait(ctx)
				continue
			}
			resetResync()
			s.backoff = 0
		}
		reason = s.watch(ctx, resyncC, listed)
	}
	return nil
}

// wait sleeps for the current backoff (doubling it for next time), or
// until ctx ends.
func (s *source[Item, Obj]) wait(ctx context.Context) {
	s.backoff = min(max(2*s.backoff, s.cfg.BackoffMin), s.cfg.BackoffMax)
	s.status.update(func(st *StatusSnapshot) { st.State = "backing off" })
	t := time.NewTimer(s.backoff)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// failed records a list or watch error.
func (s *source[Item, Obj]) failed(stage Stage, err error) {
	s.metrics.Error(stage)
	s.log.Warn("source failed, retrying", "stage", stage, "error", err)
	now := time.Now()
	s.status.update(func(st *StatusSnapshot) {
		st.LastError = string(stage) + ": " + err.Error()
		st.LastErrorAt = now
	})
	s.reportHealth()
}

func (s *source[Item, Obj]) reportHealth() {
	if s.health == nil {
		return
	}
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	snap := s.Status()
	if snap.Healthy() {
		s.health.OK(snap.HealthMessage())
	} else {
		s.health.Degraded(snap.healthReason(), snap.cause())
	}
}

// watchUp is how long a watch must run without failing to count as
// re-established after a disconnect: health turns OK again then, even if
// no event has come.
const watchUp = time.Second

// watch runs one watch session from the last resume point, committing its
// events in batches, until the watch ends, a resync comes due or ctx ends.
// It returns why the source must list again, or "" to watch again. A
// source without a resume point watches only right after a list (from
// "now", which is all such a source can do): a reconnect lists again.
func (s *source[Item, Obj]) watch(ctx context.Context, resyncC <-chan time.Time, listed bool) RelistReason {
	resume, _, _ := s.buf.state()
	if resume == "" && !listed && ctx.Err() == nil {
		return ReasonReconnect
	}
	session := s.buf.newSession(false)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	events := 0
	go func() {
		emit := func(ev Event[Item]) error {
			if err := s.buf.emit(wctx, session, ev); err != nil {
				return err
			}
			s.metrics.Event(ev.Kind)
			return nil
		}
		done <- s.cfg.ListerWatcher.Watch(wctx, resume, emit)
	}()
	s.status.update(func(st *StatusSnapshot) { st.State = "watching" })
	up := time.NewTimer(watchUp)
	defer up.Stop()
	// stop ends the session before it cancels the watch, so that whatever
	// the cancellation wakes in the watcher finds the session over
	// (ErrStaleWatch) and cannot slip an event in.
	stop := func() error {
		s.buf.newSession(false)
		cancel()
		return <-done
	}
	for {
		s.watchBlocked(ctx)
		select {
		case <-ctx.Done():
			stop()
			return ""
		case <-resyncC:
			// Events the watch handed over are applied before the list:
			// a ListerWatcher may mark listed items Unchanged relative
			// to them.
			stop()
			s.commit(ctx)
			return ReasonResync
		case <-s.resync:
			stop()
			s.commit(ctx)
			return ReasonResync
		case <-s.blocked.freed:
			s.settleBlocked()
		case <-s.initNow:
			s.initialize("InitializeAnyway")
		case <-s.initTimer():
			s.initialize("InitTimeout " + s.cfg.InitTimeout.String() + " passed")
		case err := <-done:
			s.buf.newSession(false)
			return s.watchEnded(ctx, err, events)
		case <-up.C:
			if st := s.status.get(); st.LastErrorAt.After(st.LastSync) {
				s.synced(func(*StatusSnapshot) {})
			}
		case <-s.buf.ready:
			if !s.collect(ctx) {
				continue
			}
			events += s.commit(ctx)
		}
	}
}

// collect waits for a batch to fill up or for BufferWait to pass. It
// returns false when it should not commit now (ctx ended).
func (s *source[Item, Obj]) collect(ctx context.Context) bool {
	_, _, oldest := s.buf.state()
	s.metrics.Lag(oldest)
	t := time.NewTimer(s.cfg.BufferWait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.buf.full:
	case <-ctx.Done():
		return false
	}
	return true
}

// watchEnded decides what follows a watch that returned err.
func (s *source[Item, Obj]) watchEnded(ctx context.Context, err error, events int) RelistReason {
	if ctx.Err() != nil {
		return ""
	}
	// Events that arrived before a disconnect are valid: commit them, so
	// a reconnect resumes after them.
	s.commit(ctx)
	switch {
	case errors.Is(err, ErrExpired):
		s.failed(StageWatch, err)
		return ReasonExpired
	case errors.Is(err, ErrOverflow):
		s.failed(StageWatch, err)
		return ReasonOverflow
	}
	if err != nil {
		s.failed(StageWatch, err)
	}
	if events > 0 {
		s.backoff = 0
	}
	s.wait(ctx)
	return ""
}
