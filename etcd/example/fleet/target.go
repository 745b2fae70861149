package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"time"

	"github.com/cilium/statedb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/fencing"
	"github.com/converge-go/converge/reconciler"
)

// Applied is what the fleet holds for one group at Prefix/target/<name>:
// the spec applied, and who applied it under which fencing token, so that
// an operator (and the fault tests) can tell which replica acted when.
type Applied struct {
	Spec
	// Replica is the name of the replica that applied it.
	Replica string `json:"replica"`
	// TokenKey and Token are the fencing token it was applied under: the
	// claim key (a slot's, or the election's) and its create revision.
	TokenKey string `json:"token-key"`
	Token    int64  `json:"token"`
	// At is when the replica sent the write, in Unix nanoseconds.
	At int64 `json:"at"`
}

// fleetTarget is the remote target: the fleet's API, which is etcd itself
// here. Each operation is one call of CallTime, bracketed by two fenced
// transactions: the first marks the group busy (Prefix/active/<name>,
// under the claim's lease), the second writes the result and removes the
// mark. Both compare the claim key's create revision (fencing.Txn), so a
// replica whose claim has ended writes nothing.
//
// It records what the fault tests check: an operation that finds another
// operation's mark records Prefix/overlap/<name>/<replica>; a write the
// fencing check refused records Prefix/stale/<replica>-<n>.
type fleetTarget struct {
	cli     *clientv3.Client
	prefix  string
	replica string
	// callTime is how long one call to the fleet takes.
	callTime time.Duration
	// ignoreCancel: the final write ignores the cancellation of the
	// operation's context and is sent until etcd answers, as a paused
	// process or a call that does not check its context would.
	ignoreCancel bool
	// acquire fences each of Prune's removals by its key's own claim,
	// under the Prune's context (Ownership.Acquire(ctx, nil)): sharded,
	// only a key of a slot held since the Prune was acquired may go.
	acquire func(ctx context.Context, key []byte) (context.Context, func(), bool)

	mu      sync.Mutex
	running map[string]bool // groups with an operation of this process running
	ops     int             // operations started, for the marks' values
	stale   int             // writes the fencing check refused
}

var _ reconciler.Operations[*Group] = (*fleetTarget)(nil)

func (t *fleetTarget) key(kind, name string) string { return t.prefix + "/" + kind + "/" + name }

// Update applies g's spec.
func (t *fleetTarget) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, g *Group) error {
	return t.apply(ctx, g.Name, &g.Spec)
}

// Delete removes the group from the fleet.
func (t *fleetTarget) Delete(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, g *Group) error {
	return t.apply(ctx, g.Name, nil)
}

// Prune removes the groups that are in the fleet and not desired, among
// those this replica owns, each under its own fencing token.
func (t *fleetTarget) Prune(ctx context.Context, _ statedb.ReadTxn, objs iter.Seq2[*Group, statedb.Revision]) error {
	desired := map[string]bool{}
	for g := range objs {
		desired[g.Name] = true
	}
	resp, err := t.cli.Get(ctx, t.prefix+"/target/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	var errs []error
	for _, kv := range resp.Kvs {
		name := strings.TrimPrefix(string(kv.Key), t.prefix+"/target/")
		if desired[name] {
			continue
		}
		opCtx, release, ok := t.acquire(ctx, []byte(name))
		if !ok {
			continue // another replica's, or ours no longer
		}
		errs = append(errs, t.apply(opCtx, name, nil))
		release()
	}
	return errors.Join(errs...)
}

// apply runs one operation on the group name: spec, or its removal when
// spec is nil. ctx must carry a fencing token.
func (t *fleetTarget) apply(ctx context.Context, name string, spec *Spec) error {
	tok, ok := fencing.FromContext(ctx)
	if !ok {
		return fencing.ErrNoToken
	}
	id, err := t.begin(ctx, name, tok)
	if err != nil {
		return err
	}
	defer t.end(name)
	writeCtx := ctx
	if t.ignoreCancel {
		writeCtx = context.WithoutCancel(ctx) // keeps the token
		time.Sleep(t.callTime)                // the call, deaf to ctx
	} else {
		timer := time.NewTimer(t.callTime)
		select {
		case <-timer.C: // the call
		case <-ctx.Done():
			timer.Stop()
		}
	}
	op := clientv3.OpDelete(t.key("target", name))
	if spec != nil {
		b, _ := json.Marshal(Applied{Spec: *spec, Replica: t.replica, TokenKey: tok.Key, Token: tok.Revision, At: time.Now().UnixNano()})
		op = clientv3.OpPut(t.key("target", name), string(b))
	}
	if err := t.write(writeCtx, op, clientv3.OpDelete(t.key("active", name))); err != nil {
		t.refused(err)
		// The operation is over either way: take the mark away, so that
		// a later owner does not see this one as still running.
		t.unmark(ctx, name, id)
		return err
	}
	return nil
}

// begin marks name busy at the target under tok, and records an overlap
// when another operation's mark is there, or when this process already
// runs one on name (the reconciler must never do that). It returns the
// mark's value.
func (t *fleetTarget) begin(ctx context.Context, name string, tok fencing.Token) (string, error) {
	t.mu.Lock()
	t.ops++
	id := fmt.Sprintf("%s/%d", t.replica, t.ops)
	twice := t.running[name]
	t.running[name] = true
	t.mu.Unlock()
	if twice {
		t.overlap(ctx, name, "two operations at once in one process")
		// Not ours to end: the first operation's end clears the flag.
		return "", errors.New("overlapping operation")
	}
	active := t.key("active", name)
	put := clientv3.OpPut(active, id, clientv3.WithLease(tok.Lease))
	resp, err := fencing.Txn(ctx, t.cli, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(active), "=", 0)}, put)
	if err == nil && !resp.Succeeded {
		// A mark of this replica can only be left over from an operation
		// whose cleanup failed (this process runs none on name now):
		// take it over. Anyone else's means an overlap.
		resp, err = fencing.Txn(ctx, t.cli, []clientv3.Cmp{
			clientv3.Compare(clientv3.Value(active), ">", t.replica+"/"),
			clientv3.Compare(clientv3.Value(active), "<", t.replica+"0"), // '0' follows '/'
		}, put)
		if err == nil && !resp.Succeeded {
			t.overlap(ctx, name, "another replica's operation is running")
			err = fmt.Errorf("group %s: another operation is running", name)
		}
	}
	if err != nil {
		t.refused(err)
		// A write whose answer was lost (ctx cancelled while the Txn was
		// in flight, a connection reset) may have been applied: the mark
		// is then in etcd, under this replica's lease, for as long as the
		// replica lives, and whoever owns the group next would see this
		// operation as running forever. It is ours: take it away.
		t.unmark(ctx, name, id)
		t.end(name)
		return "", err
	}
	return id, nil
}

// unmark removes name's mark if it is operation id's, whatever the state
// of ctx: the operation is over. It sends the removal until etcd answers,
// for a second at most (it holds the operation, and so a handover, that
// long); the removal is idempotent, so a lost answer of its own needs
// nothing more.
func (t *fleetTarget) unmark(ctx context.Context, name, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	active := t.key("active", name)
	for {
		_, err := t.cli.Txn(ctx).If(clientv3.Compare(clientv3.Value(active), "=", id)).
			Then(clientv3.OpDelete(active)).Commit()
		if err == nil || ctx.Err() != nil {
			return
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}
}

// end forgets that this process runs an operation on name.
func (t *fleetTarget) end(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.running, name)
}

// write makes the operation's final, fenced write. With ignoreCancel it
// insists until etcd answers, as a process that was paused sends its write
// once it runs again: the answer must then be ErrStale.
func (t *fleetTarget) write(ctx context.Context, ops ...clientv3.Op) error {
	for attempt := 0; ; attempt++ {
		err := fencing.Do(ctx, t.cli, ops...)
		if err == nil || errors.Is(err, fencing.ErrStale) || !t.ignoreCancel || attempt == 300 {
			return err
		}
		time.Sleep(100 * time.Millisecond) // unanswered: send it again
	}
}

// refused records a write the fencing check refused.
func (t *fleetTarget) refused(err error) {
	if !errors.Is(err, fencing.ErrStale) {
		return
	}
	t.mu.Lock()
	t.stale++
	n := t.stale
	t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = t.cli.Put(ctx, fmt.Sprintf("%s/stale/%s-%d", t.prefix, t.replica, n), "")
}

func (t *fleetTarget) overlap(ctx context.Context, name, why string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = t.cli.Put(cctx, t.key("overlap", name)+"/"+t.replica, why)
}
