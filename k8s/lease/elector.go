package lease

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/converge-go/converge/reconciler"
)

// The causes of a term's end, as context.Cause of its operations'
// contexts.
var (
	// ErrRenewDeadline: no renewal of the Lease succeeded for
	// RenewDeadline.
	ErrRenewDeadline = errors.New("lease: not renewed within the renew deadline")
	// ErrLeadershipLost: client-go's leader election stopped leading.
	ErrLeadershipLost = errors.New("lease: leadership lost")
	// ErrStopped: the elector was stopped.
	ErrStopped = errors.New("lease: elector stopped")
)

// Elector campaigns for a Lease and, while it holds it, lets the
// reconcilers whose Ownership it is run. Construct it with New and run it
// with Run (Cell does both in a hive).
type Elector struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	term     *term // nil unless leading
	changed  chan struct{}
	lastSent time.Time // of the last successful renewal of this replica's
	lastRec  resourcelock.LeaderElectionRecord
	renewed  chan struct{}     // a renewal succeeded
	history  []transition      // terms started and ended, for tests
	leader   string            // the holder last seen, for Status
	health   func(lead string) // reports leading or not; nil: none
}

// transition is a term starting (lead) or ending, and when.
type transition struct {
	lead bool
	at   time.Time
}

var _ reconciler.Ownership = (*Elector)(nil)

// New validates cfg and returns an elector that is not campaigning yet.
// Its errors wrap ErrInvalidConfig and name the field.
func New(cfg Config, log *slog.Logger) (*Elector, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Elector{
		cfg:     cfg,
		log:     log.With("lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity),
		changed: make(chan struct{}),
		renewed: make(chan struct{}, 1),
	}, nil
}

// Owns implements reconciler.Ownership: the leader owns every key and
// the whole set until its renew deadline passes; anyone else owns
// nothing. It takes a mutex and reads the clock.
func (e *Elector) Owns([]byte) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.term != nil && e.term.valid(time.Now())
}

// Leading is Owns(nil).
func (e *Elector) Leading() bool { return e.Owns(nil) }

// Acquire implements reconciler.Ownership. While leading it returns a
// context derived from ctx that carries the term's Token (TokenFrom) and
// is cancelled when the term ends, with the reason (ErrRenewDeadline,
// ErrLeadershipLost, ErrStopped) as its cause; release must be called
// once the operation has returned. Otherwise ok is false.
func (e *Elector) Acquire(ctx context.Context, _ []byte) (context.Context, func(), bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.term == nil || !e.term.valid(time.Now()) {
		return nil, nil, false
	}
	opCtx, release := e.term.acquire(ctx, &e.mu)
	return opCtx, release, true
}

// Changed implements reconciler.Ownership: the channel is closed when a
// term starts or ends.
func (e *Elector) Changed() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changed
}

// Token returns the current term's fencing token, and false when not
// leading.
func (e *Elector) Token() (Token, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.term == nil {
		return Token{}, false
	}
	return e.term.token, true
}

func (e *Elector) notifyLocked(lead bool) {
	close(e.changed)
	e.changed = make(chan struct{})
	e.history = append(e.history, transition{lead: lead, at: time.Now()})
}

// Run campaigns until ctx ends, leading whenever it holds the Lease. At
// the end of ctx it stops acquiring, waits (at most StopTimeout) for the
// operations in flight, cancels what is left and gives the Lease up. It
// returns nil once done.
func (e *Elector) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		if err := e.campaign(ctx); err != nil {
			return err
		}
		// A term that ended on its own (a lost or unrenewed Lease) is
		// followed by a new campaign, with a fresh elector's state.
		select {
		case <-ctx.Done():
		case <-time.After(wait.Jitter(e.cfg.RetryPeriod, 1.2)):
		}
	}
	return nil
}

// campaign runs one client-go leader election, and at most one term.
func (e *Elector) campaign(ctx context.Context) error {
	// The election's context ends only when this function ends it: at a
	// stop, after the operations are drained, so that the Lease is given
	// up after them; or when a term ends.
	ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	lock := &renewalLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: e.cfg.Namespace, Name: e.cfg.Name},
			Client:     e.cfg.Client,
			LockConfig: resourcelock.ResourceLockConfig{Identity: e.cfg.Identity},
		},
		identity: e.cfg.Identity,
		renewed:  e.renewal,
	}
	// started says whether client-go called OnStartedLeading, which it
	// does on a goroutine of its own; closed that the campaign is over,
	// and a late call must not lead.
	led := make(chan struct{})
	var (
		startMu         sync.Mutex
		started, closed bool
	)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   e.cfg.LeaseDuration,
		RenewDeadline:   e.cfg.RenewDeadline,
		RetryPeriod:     e.cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            e.cfg.Namespace + "/" + e.cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				startMu.Lock()
				if closed {
					startMu.Unlock()
					return
				}
				started = true
				startMu.Unlock()
				defer close(led)
				e.lead(lctx, cancel)
			},
			OnStoppedLeading: func() {},
			OnNewLeader:      e.newLeader,
		},
	})
	if err != nil {
		return err
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
			e.stop()
			cancel()
		case <-ectx.Done():
		}
	}()
	le.Run(ectx)
	cancel()
	<-stopped
	startMu.Lock()
	closed = true
	wasStarted := started
	startMu.Unlock()
	if wasStarted {
		<-led
	}
	return nil
}

// renewal records a successful write of the Lease naming this replica
// the holder, sent at sent: the current term's renew deadline moves to
// sent + RenewDeadline.
func (e *Elector) renewal(sent time.Time, rec resourcelock.LeaderElectionRecord) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lastSent, e.lastRec = sent, rec
	if t := e.term; t != nil && t.token.Transitions == int32(rec.LeaderTransitions) {
		if until := sent.Add(e.cfg.RenewDeadline); until.After(t.until) {
			t.until = until
		}
	}
	select {
	case e.renewed <- struct{}{}:
	default:
	}
}

// lead holds one term, from the acquisition client-go just made until
// lctx ends or the renew deadline passes; then it ends the term and the
// election (cancel).
func (e *Elector) lead(lctx context.Context, cancel context.CancelFunc) {
	e.mu.Lock()
	tok := Token{Lease: e.cfg.Namespace + "/" + e.cfg.Name, Holder: e.cfg.Identity, Transitions: int32(e.lastRec.LeaderTransitions)}
	t := newTerm(tok, e.lastSent.Add(e.cfg.RenewDeadline))
	e.term = t
	e.notifyLocked(true)
	e.mu.Unlock()
	e.log.Info("leading", "token", tok)
	e.report()
	timer := time.NewTimer(time.Until(t.until))
	defer timer.Stop()
	cause := ErrLeadershipLost
	for done := false; !done; {
		select {
		case <-lctx.Done():
			done = true
		case <-e.renewed:
		case <-timer.C:
			if e.expired(t) {
				cause, done = ErrRenewDeadline, true
			}
		}
		e.mu.Lock()
		timer.Reset(time.Until(t.until))
		e.mu.Unlock()
	}
	e.end(t, cause)
	cancel()
}

// expired reports whether t's renew deadline has passed.
func (e *Elector) expired(t *term) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return !time.Now().Before(t.until)
}

// end ends term t, if it is still the current one: nothing more is
// acquired, and its operations' contexts are cancelled with cause.
func (e *Elector) end(t *term, cause error) {
	e.mu.Lock()
	if e.term != t {
		e.mu.Unlock()
		return
	}
	e.term = nil
	t.cancel(cause)
	e.notifyLocked(false)
	e.mu.Unlock()
	e.log.Info("no longer leading", "token", t.token, "cause", cause)
	e.report()
}

// stop, at the end of Run's context, drains the current term: nothing
// more is acquired, and the operations in flight have StopTimeout to
// end; then the term ends (cancelling the rest).
func (e *Elector) stop() {
	e.mu.Lock()
	t := e.term
	var drained <-chan struct{}
	if t != nil {
		drained = t.drain()
		close(e.changed)
		e.changed = make(chan struct{})
	}
	e.mu.Unlock()
	if t == nil {
		return
	}
	timer := time.NewTimer(e.cfg.StopTimeout)
	defer timer.Stop()
	select {
	case <-drained:
	case <-timer.C:
	case <-t.ctx.Done():
	}
	e.end(t, ErrStopped)
}

// newLeader records the holder client-go saw.
func (e *Elector) newLeader(identity string) {
	e.mu.Lock()
	e.leader = identity
	e.mu.Unlock()
	e.report()
}

// report gives health the current state, when it has a reporter.
func (e *Elector) report() {
	e.mu.Lock()
	h, leader, t := e.health, e.leader, e.term
	e.mu.Unlock()
	if h == nil {
		return
	}
	if t != nil {
		h("leading, " + t.token.String())
		return
	}
	h("standby, leader " + leader)
}
