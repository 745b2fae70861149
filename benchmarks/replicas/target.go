package main

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/statedb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/fencing"
)

// errNoToken: an operation ran without a fencing token, which a sharded
// reconciler never does.
var errNoToken = errors.New("operation without a fencing token")

// sleepTarget is the in-process target of the in-process rows: every
// operation takes delay (or until its context ends). It shares one view of
// every replica's operations, to count them per replica and to check that
// no two operations on one key ever overlap.
type sleepTarget struct {
	delay time.Duration

	mu       sync.Mutex
	active   map[string]string // key -> replica running an operation on it
	overlaps int
	noToken  int

	// opTime sums how long the completed operations took, ops counts
	// them: with a delay, their mean says how late the sleeps woke up.
	opTime atomic.Int64
	ops    atomic.Int64
}

func newSleepTarget(delay time.Duration) *sleepTarget {
	return &sleepTarget{delay: delay, active: map[string]string{}}
}

// forReplica returns the Operations of one replica, counting its completed
// operations in done.
func (t *sleepTarget) forReplica(name string, done *atomic.Int64) *sleepOps {
	return &sleepOps{t: t, name: name, done: done}
}

func (t *sleepTarget) begin(key, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, busy := t.active[key]; busy {
		t.overlaps++
		return
	}
	t.active[key] = name
}

func (t *sleepTarget) end(key, name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active[key] == name {
		delete(t.active, key)
	}
}

// check returns an error if an operation overlapped another on its key or
// ran without a token.
func (t *sleepTarget) check() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.overlaps > 0 || t.noToken > 0 {
		return fmt.Errorf("target: %d overlapping operations, %d without a fencing token", t.overlaps, t.noToken)
	}
	return nil
}

type sleepOps struct {
	t    *sleepTarget
	name string
	done *atomic.Int64
}

func (o *sleepOps) op(ctx context.Context, key string) error {
	if _, ok := fencing.FromContext(ctx); !ok {
		o.t.mu.Lock()
		o.t.noToken++
		o.t.mu.Unlock()
		return errNoToken
	}
	o.t.begin(key, o.name)
	defer o.t.end(key, o.name)
	start := time.Now()
	if o.t.delay > 0 {
		timer := time.NewTimer(o.t.delay)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	o.t.opTime.Add(int64(time.Since(start)))
	o.t.ops.Add(1)
	o.done.Add(1)
	return nil
}

// meanOp returns the mean time of the completed operations so far, and
// how many there were.
func (t *sleepTarget) meanOp() (time.Duration, int64) {
	n := t.ops.Load()
	if n == 0 {
		return 0, 0
	}
	return time.Duration(t.opTime.Load() / n), n
}

func (o *sleepOps) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *object) error {
	return o.op(ctx, obj.Key)
}

func (o *sleepOps) Delete(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *object) error {
	return o.op(ctx, obj.Key)
}

func (o *sleepOps) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*object, statedb.Revision]) error {
	return nil
}

// etcdOps is the target of the replica processes: etcd itself, every write
// fenced by the slot's token (fencing.Do). An operation writes
// <prefix>/target/<key> = "<replica> <unix ns>": who reconciled the key,
// and when it ran.
type etcdOps struct {
	cli    *clientv3.Client
	prefix string
	name   string
}

func (o *etcdOps) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *object) error {
	v := o.name + " " + strconv.FormatInt(time.Now().UnixNano(), 10)
	return fencing.Do(ctx, o.cli, clientv3.OpPut(o.prefix+"/target/"+obj.Key, v))
}

func (o *etcdOps) Delete(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *object) error {
	return fencing.Do(ctx, o.cli, clientv3.OpDelete(o.prefix+"/target/"+obj.Key))
}

func (o *etcdOps) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*object, statedb.Revision]) error {
	return nil
}

// parseTargetValue splits an etcdOps value into the replica and the time.
func parseTargetValue(v string) (string, time.Time, bool) {
	name, ns, ok := strings.Cut(v, " ")
	if !ok {
		return "", time.Time{}, false
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil {
		return "", time.Time{}, false
	}
	return name, time.Unix(0, n), true
}
