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
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/source"
)

// DefaultPageSize is how many keys one list request reads at most: large
// enough that 100k small keys take about fourteen round trips.
const DefaultPageSize = 10000

// DefaultPageBytes is about how many bytes of keys and values one list
// response holds: etcd's values can be large (up to its request limit,
// 1.5 MiB by default), and 10,000 of them in one response would be
// gigabytes in etcd's memory, on the wire and in the client's.
const DefaultPageBytes = 8 << 20

// maxValueBytes is the largest value etcd accepts by default (its
// --max-request-bytes): a first page of PageBytes/maxValueBytes keys
// stays within PageBytes whatever the values are.
const maxValueBytes = 3 << 19

// pageGrowth bounds how much larger than the last page the next one
// asks for: the size of the values seen so far is a guess for the next.
const pageGrowth = 8

// KeyValue is one etcd key: the item type of the source. Key is the whole
// key, prefix included; it is also the source's key of the item.
type KeyValue struct {
	Key         string
	Value       []byte
	ModRevision int64
}

// DefaultStaleAfter is the default of Config.Source.StaleAfter for an
// etcd source: how long without an answer from etcd before health is
// Degraded. The watch asks for a progress notification every third of
// it, so a quiet watch answers well within it, and a dead one (etcd
// killed, a network cut that closes nothing) does not.
const DefaultStaleAfter = 15 * time.Second

// ListerWatcher lists and watches the keys under a prefix.
type ListerWatcher struct {
	client   *clientv3.Client
	prefix   string
	pageSize int64

	// PageBytes bounds a list response, roughly, in bytes of keys and
	// values (DefaultPageBytes when 0): the first page asks for as many
	// keys as fit if every value were as large as etcd allows, and each
	// next page for as many as fit at the size of the last page's
	// values, at most pageGrowth times the last page and pageSize.
	PageBytes int64

	// ProgressEvery is how often a watch asks etcd for a progress
	// notification (delivered as a source.Bookmark), to prove that it
	// is alive while nothing changes. 0: never.
	ProgressEvery time.Duration
}

var _ source.ListerWatcher[KeyValue] = (*ListerWatcher)(nil)

// NewListerWatcher returns a ListerWatcher of the keys under prefix,
// listed at most pageSize keys at a time (DefaultPageSize when 0), and
// about PageBytes bytes.
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
	if lw.prefix == "" {
		// Every key: etcd takes the range ["\x00", "\x00") as "from the
		// smallest key on", and refuses an empty key.
		from, end = "\x00", "\x00"
	}
	limit := lw.firstPage()
	for {
		// The first page is a linearizable read: a serializable one
		// could come from a lagging member, and a relist would then go
		// back in time (resurrecting deleted keys until the watch caught
		// up). The later pages read at the first page's revision.
		// Ranges come in key order, which the source's inserts like.
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(limit)}
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
		bytes := 0
		for _, kv := range resp.Kvs {
			k := string(kv.Key)
			res.Items = append(res.Items, source.Keyed[KeyValue]{Key: k, Item: KeyValue{Key: k, Value: kv.Value, ModRevision: kv.ModRevision}})
			bytes += len(kv.Key) + len(kv.Value)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		limit = lw.nextPage(limit, len(resp.Kvs), bytes)
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	res.Resume = strconv.FormatInt(rev, 10)
	return res, nil
}

func (lw *ListerWatcher) pageBytes() int64 {
	if lw.PageBytes > 0 {
		return lw.PageBytes
	}
	return DefaultPageBytes
}

// firstPage is how many keys the first page asks for: as many as fit in
// PageBytes if every value were as large as etcd allows.
func (lw *ListerWatcher) firstPage() int64 {
	return min(max(lw.pageBytes()/maxValueBytes, 1), lw.pageSize)
}

// nextPage is how many keys the page after one of n keys and bytes bytes,
// asked with limit, asks for: as many as fit in PageBytes at that page's
// size per key, at most pageGrowth times limit and pageSize.
func (lw *ListerWatcher) nextPage(limit int64, n, bytes int) int64 {
	perKey := max(int64(bytes)/int64(n), 1)
	return min(max(lw.pageBytes()/perKey, 1), pageGrowth*limit, lw.pageSize)
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
	wctx := clientv3.WithRequireLeader(ctx)
	// The watch starts at resume itself, not after it, and skips the
	// events of that revision, which the caller has: etcd answers no
	// progress request for a watcher that starts in the future, and
	// the progress notifications are what tell a quiet watch from a
	// dead one.
	wch := lw.client.Watch(wctx, lw.prefix,
		clientv3.WithPrefix(), clientv3.WithRev(max(rev, 1)), clientv3.WithProgressNotify())
	if lw.ProgressEvery > 0 {
		done := make(chan struct{})
		defer func() { cancel(); <-done }()
		go lw.requestProgress(wctx, done)
	}
	// A watch that hears nothing, not even an answer to its progress
	// requests, ends: the client's own reconnect resumes it after the
	// last revision it saw, where etcd answers no progress request until
	// the next write, so only a new watch from the source's resume point
	// gets them again.
	var silence <-chan time.Time
	var silenceT *time.Timer
	if lw.ProgressEvery > 0 {
		silenceT = time.NewTimer(3 * lw.ProgressEvery)
		defer silenceT.Stop()
		silence = silenceT.C
	}
	for {
		var resp clientv3.WatchResponse
		var ok bool
		select {
		case resp, ok = <-wch:
		case <-silence:
			return fmt.Errorf("etcd watch %q: no answer from etcd for %s", lw.prefix, 3*lw.ProgressEvery)
		}
		if !ok {
			break
		}
		if silenceT != nil {
			silenceT.Reset(3 * lw.ProgressEvery)
		}
		if err := lw.deliver(resp, rev, emit); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("etcd watch %q: channel closed", lw.prefix)
}

// deliver emits one watch response's events after revision rev, or its
// progress notification as a Bookmark.
func (lw *ListerWatcher) deliver(resp clientv3.WatchResponse, rev int64, emit func(source.Event[KeyValue]) error) error {
	if err := resp.Err(); err != nil {
		if resp.CompactRevision != 0 || errors.Is(err, rpctypes.ErrCompacted) {
			return fmt.Errorf("etcd watch from %d, compacted at %d: %w", rev, resp.CompactRevision, source.ErrExpired)
		}
		return fmt.Errorf("etcd watch %q: %w", lw.prefix, err)
	}
	if resp.IsProgressNotify() {
		if err := emit(source.Event[KeyValue]{Kind: source.Bookmark, Resume: strconv.FormatInt(resp.Header.Revision, 10)}); err != nil {
			return err
		}
		return nil
	}
	for i, ev := range resp.Events {
		if ev.Kv.ModRevision <= rev {
			continue
		}
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
	return nil
}

// requestProgress asks for a progress notification every ProgressEvery,
// on the watch's own stream (the same context), until ctx ends. A
// request to a dead server blocks until the stream is back or ctx ends.
func (lw *ListerWatcher) requestProgress(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(lw.ProgressEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_ = lw.client.RequestProgress(ctx) // a failure shows as silence
	}
}
