// Package watch is the etcd watch that the coordination of packages
// leader and shard relies on: one that cannot go blind. Those packages take
// a watch's silence to mean "nothing changed" (the leader's key is still
// there, no member left, the previous candidate still campaigns), so a
// silent watch must be a live one.
//
// A plain clientv3 watch can stay open and silent for ever on a member
// that is cut off from its peers but still reachable by clients: it has
// no leader, applies nothing, and sends nothing. Watch here
//
//   - requires a leader (clientv3.WithRequireLeader): a member that has
//     had none for 3 to 4 of its election timeouts cancels the stream
//     (etcd's monitorLeader), and the stream is opened again, which the
//     client's round robin sends to the next member (a member without a
//     leader refuses new streams at once). A member cut off from its
//     peers still answers progress requests from its own state, so this,
//     not the silence, is what leaves it;
//   - asks for progress (clientv3.RequestProgress) after Silence without
//     any response, and abandons the stream for a new one when the
//     request is not answered within Silence more, or when the member has
//     not created the watch within 2 × Silence: a member that hangs
//     without closing its connection is left within 2 × Silence;
//   - opens each stream with metadata of its own, because clientv3 shares
//     one gRPC stream between the watches whose contexts carry the same
//     metadata, and a new stream is what moves the watch to another
//     member;
//   - resumes every new stream after the last revision delivered, so no
//     event is lost or repeated.
package watch

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// DefaultSilence is the default Silence: a watch that has said nothing for
// a second is asked for progress, and one that does not answer within
// another second is moved to another member.
const DefaultSilence = time.Second

// reopenPause is the pause before a stream is opened again, so that a
// cluster with no leader anywhere is not asked in a tight loop.
const reopenPause = 50 * time.Millisecond

// Response is what a Watch delivers: the events of one etcd response, in
// order, or a progress notification (no events) saying that everything up
// to Revision has been delivered. Err is set, once and last, when the
// watch cannot go on: the revision to resume from was compacted.
type Response struct {
	Events   []*clientv3.Event
	Revision int64
	Err      error
}

// Watch watches key (with opts, such as clientv3.WithPrefix) from revision
// from on, until Stop. Construct it with New.
type Watch struct {
	c      chan Response
	cancel context.CancelFunc
	done   chan struct{}
}

var streams atomic.Uint64

// New starts watching key from revision from (> 0) on. silence is the
// Silence of the package doc; 0 means DefaultSilence. The watch runs
// until ctx ends or Stop is called; its channel C is closed then.
func New(ctx context.Context, cli *clientv3.Client, key string, from int64, silence time.Duration, opts ...clientv3.OpOption) *Watch {
	if silence <= 0 {
		silence = DefaultSilence
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &Watch{c: make(chan Response), cancel: cancel, done: make(chan struct{})}
	r := &runner{cli: cli, key: key, opts: opts, next: from, silence: silence, out: w.c}
	go func() {
		defer close(w.done)
		defer close(w.c)
		r.run(ctx)
	}()
	return w
}

// C delivers the responses in order. It is closed after a Response with
// Err, or once the watch is stopped.
func (w *Watch) C() <-chan Response { return w.c }

// Stop ends the watch and waits until its goroutine has returned.
func (w *Watch) Stop() {
	w.cancel()
	<-w.done
}

type runner struct {
	cli     *clientv3.Client
	key     string
	opts    []clientv3.OpOption
	next    int64 // the first revision not delivered yet
	silence time.Duration
	out     chan<- Response
}

// ErrCompacted is the Err of a watch whose next revision was compacted:
// the caller must read the state again.
var ErrCompacted = errors.New("watch: revision compacted")

func (r *runner) run(ctx context.Context) {
	for {
		err := r.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, ErrCompacted) {
			select {
			case r.out <- Response{Err: err}:
			case <-ctx.Done():
			}
			return
		}
		select {
		case <-time.After(reopenPause):
		case <-ctx.Done():
			return
		}
	}
}

// stream runs one gRPC stream until it ends, goes silent, or ctx ends.
func (r *runner) stream(ctx context.Context) error {
	id := fmt.Sprintf("%d", streams.Add(1))
	sctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(
		clientv3.WithRequireLeader(ctx), "converge-watch-stream", id))
	defer cancel()
	opts := append([]clientv3.OpOption{clientv3.WithRev(r.next), clientv3.WithProgressNotify()}, r.opts...)
	// clientv3's Watch returns only once the member has created the
	// watch: a member that hangs would hold it for ever. Give up on the
	// stream after two silences, as on one that stopped answering.
	created := make(chan struct{})
	giveUp := time.AfterFunc(2*r.silence, func() {
		select {
		case <-created:
		default:
			cancel()
		}
	})
	wch := r.cli.Watch(sctx, r.key, opts...)
	close(created)
	giveUp.Stop()
	quiet := time.NewTimer(r.silence)
	defer quiet.Stop()
	asked := false
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-quiet.C:
			if asked {
				return errors.New("watch: no answer to a progress request")
			}
			// Unanswered, this moves the watch to another member.
			_ = r.cli.RequestProgress(sctx)
			asked = true
			quiet.Reset(r.silence)
		case wr, ok := <-wch:
			if !ok {
				return errors.New("watch: stream closed")
			}
			if wr.CompactRevision != 0 || errors.Is(wr.Err(), rpctypes.ErrCompacted) {
				return fmt.Errorf("%w: from %d, compacted at %d", ErrCompacted, r.next, wr.CompactRevision)
			}
			if err := wr.Err(); err != nil || wr.Canceled {
				return fmt.Errorf("watch: stream ended: %v", err)
			}
			asked = false
			quiet.Reset(r.silence)
			if !r.deliver(ctx, wr) {
				return ctx.Err()
			}
		}
	}
}

// deliver passes one response on and moves the resume point past it.
func (r *runner) deliver(ctx context.Context, wr clientv3.WatchResponse) bool {
	resp := Response{Events: wr.Events, Revision: wr.Header.Revision}
	if n := len(wr.Events); n > 0 {
		resp.Revision = wr.Events[n-1].Kv.ModRevision
	}
	if resp.Revision < r.next {
		// A progress notification of a member behind the revision this
		// watch has already delivered up to says nothing new.
		return true
	}
	select {
	case r.out <- resp:
		r.next = resp.Revision + 1
		return true
	case <-ctx.Done():
		return false
	}
}
