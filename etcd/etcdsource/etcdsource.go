// Package etcdsource feeds a statedb table from the keys under a prefix in
// etcd, the store Kubernetes keeps its own state in. It is a
// source.ListerWatcher over go.etcd.io/etcd/client/v3 plus the glue that
// registers it as a source (see package source for the contract).
//
// The list reads every key under the prefix at one revision, in pages,
// and the watch starts at the next revision, so nothing between the two is
// missed. The client's watch survives disconnects and server restarts by
// itself, resuming from the last revision it delivered; when the source's
// watch ends anyway (the context, a lost leader, a closed client) the
// source watches again from the last revision it saw. When etcd has
// compacted past that revision the watch fails with ErrCompacted, and the
// source lists again: keys deleted meanwhile are deleted from the table in
// the relist's transaction.
package etcdsource

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/source"
)

// DefaultPageSize is how many keys one list request reads: large enough
// that 100k keys take ten round trips, small enough that a response stays
// far below etcd's 2 MiB request limit for small values.
const DefaultPageSize = 10000

// KeyValue is one etcd key: the item type of the source. Key is the whole
// key, prefix included; it is also the source's key of the item.
type KeyValue struct {
	Key         string
	Value       []byte
	ModRevision int64
}

// ListerWatcher lists and watches the keys under a prefix.
type ListerWatcher struct {
	client   *clientv3.Client
	prefix   string
	pageSize int64
}

var _ source.ListerWatcher[KeyValue] = (*ListerWatcher)(nil)

// NewListerWatcher returns a ListerWatcher of the keys under prefix,
// listed pageSize keys at a time (DefaultPageSize when 0).
func NewListerWatcher(client *clientv3.Client, prefix string, pageSize int64) *ListerWatcher {
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	return &ListerWatcher{client: client, prefix: prefix, pageSize: pageSize}
}

// List implements source.ListerWatcher: every key under the prefix at one
// revision, which is the resume point. A revision compacted between the
// pages fails the list, which the source retries.
func (lw *ListerWatcher) List(ctx context.Context) (source.ListResult[KeyValue], error) {
	var (
		res   source.ListResult[KeyValue]
		rev   int64
		from  = lw.prefix
		end   = clientv3.GetPrefixRangeEnd(lw.prefix)
		first = true
	)
	for {
		// The first page is a linearizable read: a serializable one
		// could come from a lagging member, and a relist would then go
		// back in time (resurrecting deleted keys until the watch caught
		// up). The later pages read at the first page's revision.
		// Ranges come in key order, which the source's inserts like.
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(lw.pageSize)}
		if !first {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := lw.client.Get(ctx, from, opts...)
		if err != nil {
			return res, fmt.Errorf("etcd list %q: %w", lw.prefix, err)
		}
		if first {
			rev, first = resp.Header.Revision, false
			res.Items = make([]source.Keyed[KeyValue], 0, resp.Count)
		}
		for _, kv := range resp.Kvs {
			k := string(kv.Key)
			res.Items = append(res.Items, source.Keyed[KeyValue]{Key: k, Item: KeyValue{Key: k, Value: kv.Value, ModRevision: kv.ModRevision}})
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	res.Resume = strconv.FormatInt(rev, 10)
	return res, nil
}

// Watch implements source.ListerWatcher: the changes after revision
// resume. ErrCompacted becomes source.ErrExpired.
func (lw *ListerWatcher) Watch(ctx context.Context, resume string, emit func(source.Event[KeyValue]) error) error {
	rev, err := strconv.ParseInt(resume, 10, 64)
	if err != nil {
		return fmt.Errorf("etcd watch: bad resume point %q: %w", resume, source.ErrExpired)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := lw.client.Watch(clientv3.WithRequireLeader(ctx), lw.prefix,
		clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithProgressNotify())
	for resp := range wch {
		if err := resp.Err(); err != nil {
			if resp.CompactRevision != 0 || errors.Is(err, rpctypes.ErrCompacted) {
				return fmt.Errorf("etcd watch from %d, compacted at %d: %w", rev+1, resp.CompactRevision, source.ErrExpired)
			}
			return fmt.Errorf("etcd watch %q: %w", lw.prefix, err)
		}
		if resp.IsProgressNotify() {
			if err := emit(source.Event[KeyValue]{Kind: source.Bookmark, Resume: strconv.FormatInt(resp.Header.Revision, 10)}); err != nil {
				return err
			}
			continue
		}
		for i, ev := range resp.Events {
			k := string(ev.Kv.Key)
			out := source.Event[KeyValue]{Key: k}
			if ev.Type == clientv3.EventTypeDelete {
				out.Kind = source.Delete
			} else {
				out.Item = KeyValue{Key: k, Value: ev.Kv.Value, ModRevision: ev.Kv.ModRevision}
			}
			// Resume after a response, not inside it: the events of one
			// transaction share a revision and come in one response.
			if i == len(resp.Events)-1 {
				out.Resume = strconv.FormatInt(ev.Kv.ModRevision, 10)
			}
			if err := emit(out); err != nil {
				return err
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("etcd watch %q: channel closed", lw.prefix)
}
