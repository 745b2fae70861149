package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/fencing"
	"github.com/converge-go/converge/etcd/internal/etcderr"
	"github.com/converge-go/converge/etcd/internal/lease"
	"github.com/converge-go/converge/etcd/internal/watch"
)

// campaign creates this session's election key and waits until every
// older key of the election is gone: the protocol of client/v3's
// concurrency.Election, with two differences that keep a standby live.
//
//   - The wait for an older key is package watch's, not a plain watch: a
//     member cut off from its peers cannot keep it silent while the
//     leader's key is deleted elsewhere (finding 8 of issue 32).
//   - A create whose answer was lost (Unavailable, a reset connection:
//     clientv3 does not retry a Txn once sent) is adopted: the key under
//     this session's own lease is this session's, with its create revision
//     as the token. Without that, the key would block every younger
//     candidate until the session ended.
//
// It returns the token of the key; the caller still verifies it (#19597).
func (e *Elector) campaign(ctx context.Context, s *lease.Session) (fencing.Token, error) {
	// A member without a leader refuses at once instead of holding the
	// request until its own timeout; reads are retried on the next member.
	ctx = clientv3.WithRequireLeader(ctx)
	key := fmt.Sprintf("%s/%x", e.cfg.Prefix, int64(s.Lease()))
	tok := fencing.Token{Key: key, Lease: s.Lease()}
	var err error
	for try := 0; tok.Revision == 0; try++ {
		tok.Revision, err = e.create(ctx, key, s)
		// Refused by a member without a leader, or timed out, and not
		// applied: the next try goes to the next member.
		if err != nil && (!retriable(err) || try == maxTries) {
			return tok, fmt.Errorf("create %s: %w", key, err)
		}
	}
	return tok, e.waitOlder(ctx, tok.Revision)
}

// callTimeout bounds each etcd call of a campaign. A member that has just
// been cut from its peers still believes it has a leader for an election
// timeout and holds a request sent to it then until its own request
// timeout (5 s and more); a standby must not wait that long. A create that
// timed out may have been applied: it is looked up and adopted.
const callTimeout = time.Second

func call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, callTimeout)
}

// maxTries bounds the immediate retries of a call that a member refused
// as unavailable; then the session starts over after RetryInterval.
const maxTries = 3

// retriable reports whether a call may be tried again at once, on the
// next member: refused as unavailable, or not answered within callTimeout.
func retriable(err error) bool {
	return etcderr.Unavailable(err) || errors.Is(err, context.DeadlineExceeded)
}

// create creates key under the session's lease if absent, and returns its
// create revision, or 0 and the error when it was not created.
func (e *Elector) create(ctx context.Context, key string, s *lease.Session) (int64, error) {
	cctx, cancel := call(ctx)
	defer cancel()
	resp, err := e.cfg.Client.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, e.cfg.Name, clientv3.WithLease(s.Lease()))).
		Else(clientv3.OpGet(key)).Commit()
	if err == nil {
		if resp.Succeeded {
			return resp.Header.Revision, nil
		}
		// Only an earlier create of this very session can have made it.
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			return kvs[0].CreateRevision, nil
		}
		return 0, fmt.Errorf("%s neither created nor found", key)
	}
	rev, aerr := e.adopt(ctx, key, s)
	if aerr != nil || rev == 0 {
		return 0, err
	}
	return rev, nil
}

// adopt reads key after its create failed: the answer may have been lost
// after etcd applied it. Under this session's lease, the key is the
// session's own; it returns its create revision, or 0 when absent.
func (e *Elector) adopt(ctx context.Context, key string, s *lease.Session) (int64, error) {
	cctx, cancel := call(ctx)
	defer cancel()
	resp, err := e.cfg.Client.Get(cctx, key)
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 0 || clientv3.LeaseID(resp.Kvs[0].Lease) != s.Lease() {
		return 0, nil
	}
	e.log.Info("election: adopting a key whose create answer was lost", "key", key)
	return resp.Kvs[0].CreateRevision, nil
}

// waitOlder returns once no key of the election was created before rev,
// or when ctx ends. It waits for the newest older key's delete, as
// concurrency.Election does, so that a line of candidates wakes one at a
// time.
func (e *Elector) waitOlder(ctx context.Context, rev int64) error {
	for {
		cctx, cancel := call(ctx)
		resp, err := e.cfg.Client.Get(cctx, e.cfg.Prefix+"/",
			append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))...)
		cancel()
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		if err := e.waitDelete(ctx, string(resp.Kvs[0].Key), resp.Header.Revision); err != nil {
			return err
		}
	}
}

// waitDelete returns once key is deleted after revision rev.
func (e *Elector) waitDelete(ctx context.Context, key string, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := watch.New(wctx, e.cfg.Client, key, rev+1, 0)
	defer w.Stop()
	for wr := range w.C() {
		if wr.Err != nil {
			return nil // compacted: look at the election again
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return nil
			}
		}
	}
	return ctx.Err()
}
