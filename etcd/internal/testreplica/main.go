// Command testreplica is one replica of a sharded controller, for the
// multi-process fault tests of package shard: it joins the group, and for
// every key it owns runs one fenced operation against etcd as the target,
// as a reconciler would for the keys it newly owns.
//
// The target records what the tests check:
//   - Prefix/target/<key> = "<replica>@<slot token revision>@<unix ns>":
//     who last reconciled the key, under which claim, and when;
//   - Prefix/active/<key>, under the replica's lease, while an operation
//     on the key runs: an operation that finds another one's marker
//     records Prefix/overlap/<key>/<replica>;
//   - Prefix/stale/<replica>-<n>: a write the fencing check refused.
//
// With -leader-only it owns every key while it leads an election
// (package leader) instead of a share of the slots.
//
// With -refresh it reconciles every owned key again at that interval, so
// that operations are in flight at any moment, and prints the longest
// pause between two accepted writes when it stops ("longest pause <ns>"); with -ignore-cancel its
// writes ignore the cancellation of their context, as a paused process or
// an operation that does not check its context would.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/etcd/fencing"
	"github.com/converge-go/converge/etcd/leader"
	"github.com/converge-go/converge/etcd/shard"
)

type replica struct {
	cli    *clientv3.Client
	m      owner
	name   string
	prefix string
	keys   int
	opTime time.Duration
	sem    chan struct{}
	stale  int
	// ignoreCancel: the final write does not stop when opCtx is
	// cancelled (it still carries opCtx's token).
	ignoreCancel bool

	mu   sync.Mutex
	done map[string]int64 // key -> token revision it was reconciled under
	busy map[string]bool
	// lastWrite and longest time the accepted writes: with -refresh they
	// never stop, so the longest gap between two is the longest pause.
	lastWrite time.Time
	longest   time.Duration
}

func main() {
	var (
		endpoints = flag.String("endpoints", "", "etcd client URLs, comma-separated")
		name      = flag.String("name", "", "replica name")
		prefix    = flag.String("prefix", "/fleet", "key prefix")
		keys      = flag.Int("keys", 64, "number of keys")
		slots     = flag.Int("slots", 32, "number of slots")
		ttl       = flag.Duration("ttl", 3*time.Second, "lease TTL")
		opTime    = flag.Duration("op", 10*time.Millisecond, "time one operation takes")
		limit     = flag.Int("concurrency", 16, "operations at once")
		refresh   = flag.Duration("refresh", 0, "reconcile every owned key again this often (0: never)")
		ignore    = flag.Bool("ignore-cancel", false, "let the final write ignore a cancelled context")
		leaderOn  = flag.Bool("leader-only", false, "own every key while leading an election, instead of sharding")
	)
	flag.Parse()
	o := options{keys: *keys, slots: *slots, ttl: *ttl, opTime: *opTime, limit: *limit, refresh: *refresh,
		ignoreCancel: *ignore, leaderOnly: *leaderOn}
	if err := run(*endpoints, *name, *prefix, o); err != nil {
		fmt.Fprintln(os.Stderr, "testreplica:", err)
		os.Exit(1)
	}
}

type options struct {
	keys, slots, limit   int
	ttl, opTime, refresh time.Duration
	ignoreCancel         bool
	leaderOnly           bool
}

// owner is what the replica needs of a shard.Manager or a leader.Elector.
type owner interface {
	Run(ctx context.Context) error
	Acquire(ctx context.Context, key []byte) (context.Context, func(), bool)
	Changed() <-chan struct{}
	// tokenFor returns the token that governs key now, if owned.
	tokenFor(key []byte) (fencing.Token, bool)
	// owned returns how many slots (or terms) are held now.
	owned() int
}

type shardOwner struct{ *shard.Manager }

func (s shardOwner) tokenFor(key []byte) (fencing.Token, bool) { return s.Token(s.SlotOf(key)) }
func (s shardOwner) owned() int                                { return len(s.Owned()) }

type leaderOwner struct{ *leader.Elector }

func (l leaderOwner) tokenFor([]byte) (fencing.Token, bool) { return l.Token() }
func (l leaderOwner) owned() int {
	if l.Owns(nil) {
		return 1
	}
	return 0
}

func newOwner(cli *clientv3.Client, log *slog.Logger, prefix, name string, o options) (owner, error) {
	if o.leaderOnly {
		e, err := leader.New(leader.Config{
			Client: cli, Prefix: prefix + "/leader", Name: name, TTL: o.ttl,
			RetryInterval: 200 * time.Millisecond,
		}, log)
		return leaderOwner{e}, err
	}
	m, err := shard.New(shard.Config{
		Client: cli, Prefix: prefix + "/shards", Name: name, Slots: o.slots, TTL: o.ttl,
		RetryInterval: 200 * time.Millisecond, SummaryInterval: time.Second,
	}, log)
	return shardOwner{m}, err
}

func run(endpoints, name, prefix string, o options) error {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: strings.Split(endpoints, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		// Notice a member that stopped answering (crashed host,
		// partition) in about 2 s and move to another, well within the
		// lease's safety margin.
		DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second,
	})
	if err != nil {
		return err
	}
	defer cli.Close()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("replica", name)
	m, err := newOwner(cli, log, prefix, name, o)
	if err != nil {
		return err
	}
	r := &replica{cli: cli, m: m, name: name, prefix: prefix, keys: o.keys, opTime: o.opTime,
		sem: make(chan struct{}, o.limit), done: map[string]int64{}, busy: map[string]bool{},
		ignoreCancel: o.ignoreCancel}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		r.reconcile(ctx, o.refresh)
	}()
	go func() {
		defer wg.Done()
		r.reportDrops(ctx)
	}()
	err = m.Run(ctx)
	wg.Wait()
	r.mu.Lock()
	fmt.Printf("longest pause %d\n", r.longest.Nanoseconds())
	r.mu.Unlock()
	return err
}

// reconcile starts an operation for every owned key not yet reconciled
// under its slot's current claim, whenever the owned set changes, and
// retries failed ones every retry interval.
func (r *replica) reconcile(ctx context.Context, refresh time.Duration) {
	var wg sync.WaitGroup
	defer wg.Wait()
	retry := time.NewTicker(200 * time.Millisecond)
	defer retry.Stop()
	var refreshC <-chan time.Time
	if refresh > 0 {
		t := time.NewTicker(refresh)
		defer t.Stop()
		refreshC = t.C
	}
	for {
		changed := r.m.Changed()
		for i := range r.keys {
			key := "group-" + strconv.Itoa(i)
			tok, ok := r.m.tokenFor([]byte(key))
			if !ok || !r.claim(key, tok.Revision) {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer r.unbusy(key)
				r.operate(ctx, key)
			}()
		}
		select {
		case <-changed:
		case <-retry.C:
		case <-refreshC:
			r.mu.Lock()
			clear(r.done)
			r.mu.Unlock()
		case <-ctx.Done():
			return
		}
	}
}

// reportDrops prints "owned 0" whenever the replica goes from owning
// slots to owning none, for tests to time it.
func (r *replica) reportDrops(ctx context.Context) {
	owned := 0
	for {
		changed := r.m.Changed()
		n := r.m.owned()
		if owned > 0 && n == 0 {
			fmt.Println("owned 0")
		}
		owned = n
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// claim marks key busy if it needs an operation under revision rev.
func (r *replica) claim(key string, rev int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.busy[key] || r.done[key] == rev {
		return false
	}
	r.busy[key] = true
	return true
}

func (r *replica) unbusy(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.busy, key)
}

func (r *replica) operate(ctx context.Context, key string) {
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-r.sem }()
	opCtx, release, ok := r.m.Acquire(ctx, []byte(key))
	if !ok {
		return
	}
	defer release()
	tok, _ := fencing.FromContext(opCtx)
	active := r.prefix + "/active/" + key
	// Begin: mark the key active, or record that someone else's operation
	// is running on it.
	resp, err := fencing.Txn(opCtx, r.cli,
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(active), "=", 0)},
		clientv3.OpPut(active, r.name, clientv3.WithLease(tok.Lease)))
	if r.refused(err) {
		return
	}
	if !resp.Succeeded {
		// Our own marker can only be left over from an operation whose
		// final write failed (this replica never runs two operations on
		// one key): take it over. Anyone else's means an overlap.
		resp, err = fencing.Txn(opCtx, r.cli,
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(active), "=", r.name)},
			clientv3.OpPut(active, r.name, clientv3.WithLease(tok.Lease)))
		if r.refused(err) {
			return
		}
		if !resp.Succeeded {
			_, _ = r.cli.Put(context.WithoutCancel(ctx), r.prefix+"/overlap/"+key+"/"+r.name, r.name)
			return
		}
	}
	writeCtx := opCtx
	if r.ignoreCancel {
		writeCtx = context.WithoutCancel(opCtx) // keeps the token
		time.Sleep(r.opTime)                    // the remote call, deaf to opCtx
	} else {
		select {
		case <-time.After(r.opTime): // the remote call
		case <-opCtx.Done():
		}
	}
	// End: the write itself, and the marker removed, in one fenced txn.
	err = r.write(writeCtx, key, tok)
	if r.refused(err) {
		// The operation is over either way: take our marker away, so
		// that a later owner does not see this one as still running.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_, _ = r.cli.Txn(cctx).If(clientv3.Compare(clientv3.Value(active), "=", r.name)).
			Then(clientv3.OpDelete(active)).Commit()
		return
	}
	r.mu.Lock()
	r.done[key] = tok.Revision
	now := time.Now()
	if !r.lastWrite.IsZero() {
		r.longest = max(r.longest, now.Sub(r.lastWrite))
	}
	r.lastWrite = now
	r.mu.Unlock()
}

// write makes the operation's final, fenced write. With -ignore-cancel it
// insists until etcd answers, as a process that was paused and sends its
// write once it runs again: the answer must then be ErrStale.
func (r *replica) write(ctx context.Context, key string, tok fencing.Token) error {
	for attempt := 0; ; attempt++ {
		_, err := fencing.Txn(ctx, r.cli, nil,
			clientv3.OpPut(r.prefix+"/target/"+key, fmt.Sprintf("%s@%d@%d", r.name, tok.Revision, time.Now().UnixNano())),
			clientv3.OpDelete(r.prefix+"/active/"+key))
		if err == nil || errors.Is(err, fencing.ErrStale) || !r.ignoreCancel || attempt == 300 {
			return err
		}
		time.Sleep(100 * time.Millisecond) // unanswered: send it again
	}
}

// refused reports whether err means the operation did not happen, and
// records a write the fencing check refused.
func (r *replica) refused(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, fencing.ErrStale) {
		r.mu.Lock()
		r.stale++
		n := r.stale
		r.mu.Unlock()
		_, _ = r.cli.Put(context.Background(), fmt.Sprintf("%s/stale/%s-%d", r.prefix, r.name, n), "")
	}
	return true
}
