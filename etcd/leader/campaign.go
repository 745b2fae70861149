package leader

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/fencing"
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
	key := fmt.Sprintf("%s/%x", e.cfg.Prefix, int64(s.Lease()))
	tok := fencing.Token{Key: key, Lease: s.Lease()}
	resp, err := e.cfg.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, e.cfg.Name, clientv3.WithLease(s.Lease()))).
		Else(clientv3.OpGet(key)).Commit()
	switch {
	case err != nil:
		tok.Revision, err = e.adopt(ctx, key, s)
		if err != nil {
			return tok, fmt.Errorf("create %s: %w", key, err)
		}
	case resp.Succeeded:
		tok.Revision = resp.Header.Revision
	default:
		// Only an earlier create of this very session can have made it.
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			return tok, fmt.Errorf("create %s: neither created nor found", key)
		}
		tok.Revision = kvs[0].CreateRevision
	}
	return tok, e.waitOlder(ctx, tok.Revision)
}

// adopt reads key after its create's answer was lost: under this session's
// lease it is the session's own; absent, the create was not applied.
func (e *Elector) adopt(ctx context.Context, key string, s *lease.Session) (int64, error) {
	resp, err := e.cfg.Client.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 0 || clientv3.LeaseID(resp.Kvs[0].Lease) != s.Lease() {
		return 0, fmt.Errorf("%s not created", key)
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
		resp, err := e.cfg.Client.Get(ctx, e.cfg.Prefix+"/",
			append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))...)
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
