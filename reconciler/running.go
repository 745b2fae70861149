package reconciler

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/cilium/statedb"
)

// The reconcilers running in this process, by table: WaitForReconciliation
// is given a table and its status index, not a reconciler, yet it must
// return a misconfiguration at once and, when it gives up, say which key
// it waited for and why. A reconciler is here while its loop runs. Nothing
// is published: the list is only read by the waits.

// tableRef names a table of a database.
type tableRef struct {
	db    *statedb.DB
	table statedb.TableName
}

var running = struct {
	mu      sync.Mutex
	byTable map[tableRef][]runningReconciler
}{byTable: map[tableRef][]runningReconciler{}}

// runningReconciler is what the waits ask of a running reconciler,
// whatever its object type.
type runningReconciler interface {
	displayName() string
	// progressNow returns its published progress and the channel closed
	// at its next publication.
	progressNow() (progressValues, <-chan struct{})
	// statusIn returns its status in obj, false when obj is not of its
	// type.
	statusIn(obj any) (Status, bool)
	Explain(ctx context.Context, key []byte) (Explanation, error)
}

// enlist adds r to the running reconcilers until the returned func is
// called.
func (r *reconciler[Obj]) enlist() func() {
	ref := tableRef{r.db, r.cfg.Table.Name()}
	running.mu.Lock()
	running.byTable[ref] = append(running.byTable[ref], r)
	running.mu.Unlock()
	return func() {
		running.mu.Lock()
		defer running.mu.Unlock()
		list := running.byTable[ref]
		for i, x := range list {
			if x == runningReconciler(r) {
				list = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(running.byTable, ref)
		} else {
			running.byTable[ref] = list
		}
	}
}

func runningOn(db *statedb.DB, table statedb.TableName) []runningReconciler {
	running.mu.Lock()
	defer running.mu.Unlock()
	return append([]runningReconciler(nil), running.byTable[tableRef{db, table}]...)
}

func (r *reconciler[Obj]) displayName() string { return r.id.DisplayName() }

func (r *reconciler[Obj]) progressNow() (progressValues, <-chan struct{}) {
	r.progress.mu.Lock()
	defer r.progress.mu.Unlock()
	return r.progress.progressValues, r.progress.changed
}

func (r *reconciler[Obj]) statusIn(obj any) (Status, bool) {
	o, ok := obj.(Obj)
	if !ok {
		return Status{}, false
	}
	return r.cfg.GetObjectStatus(o), true
}

// misconfigured returns the channels closed when a reconciler of rs
// publishes next, or the misconfiguration that keeps one of them from
// reconciling objects.
func misconfigured(rs []runningReconciler) ([]<-chan struct{}, error) {
	var chans []<-chan struct{}
	for _, r := range rs {
		v, ch := r.progressNow()
		if v.blocked != nil {
			return nil, wrapName(r.displayName(), v.blocked)
		}
		chans = append(chans, ch)
	}
	return chans, nil
}

// waitAny blocks until ctx ends or one of chans is closed; it reports
// whether ctx ended.
func waitAny(ctx context.Context, chans ...<-chan struct{}) bool {
	cases := make([]reflect.SelectCase, 0, len(chans)+1)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
	for _, ch := range chans {
		if ch != nil {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		}
	}
	chosen, _, _ := reflect.Select(cases)
	return chosen == 0
}

// explainBriefly asks r to explain key for a wait that gave up (its own
// context ended): a short answer, or "".
func explainBriefly(ctx context.Context, r runningReconciler, key []byte) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 100*time.Millisecond)
	defer cancel()
	e, err := r.Explain(ctx, key)
	if err != nil {
		return ""
	}
	s := e.State.String() + ": " + e.Reason
	if e.LastError != "" {
		s += " (last error: " + e.LastError + ")"
	}
	return s
}
