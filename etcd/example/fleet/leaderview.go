package main

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/fencing"
	"github.com/converge-go/converge/etcd/leader"
	"github.com/converge-go/converge/etcd/shard"
)

// viewPrefix is where the cluster view is read: the shard group's keys,
// or, leader-only, the one-slot group the leader publishes (see
// publishLeaderView), so that both modes answer with one shape
// (shard.View).
func viewPrefix(o options) string {
	if o.leaderOnly {
		return o.prefix + "/leader-view"
	}
	return o.prefix + "/shards"
}

// publishLeaderView publishes, while this replica leads, the view of a
// leader-only fleet as a group of one slot that the leader holds: at term
// start, the slot count, the slot's claim and the member key (under the
// term's lease, so they vanish with the term), then, in a later write so
// that it is newer than the claim, the summary; then the summary again at
// most every interval when the counts change. Every write is fenced by the
// term's token. shard.ReadView reads it as it reads a sharded group.
func publishLeaderView(ctx context.Context, cli *clientv3.Client, e *leader.Elector, o options, rep *reporter) {
	ticker := time.NewTicker(o.summaryEvery)
	defer ticker.Stop()
	prefix := viewPrefix(o)
	var last shard.Summary
	var lastTok, claimed fencing.Token
	for {
		changed := e.Changed()
		if tok, ok := e.Token(); ok {
			fctx := fencing.WithToken(ctx, tok)
			lease := clientv3.WithLease(tok.Lease)
			if tok != claimed && fencing.Do(fctx, cli,
				clientv3.OpPut(prefix+"/slots", strconv.Itoa(1)),
				clientv3.OpPut(prefix+"/slots/0", o.name, lease),
				clientv3.OpPut(prefix+"/members/"+o.name, o.name, lease)) == nil {
				claimed = tok
			}
			s := shard.Summary{Name: o.name, Slots: []int{0}, Report: rep.report()}
			if claimed == tok && (tok != lastTok || s.Report != last.Report) {
				s.UpdatedAt = time.Now()
				b, _ := json.Marshal(s)
				if fencing.Do(fctx, cli, clientv3.OpPut(prefix+"/summary/"+o.name, string(b), lease)) == nil {
					last, lastTok = s, tok
				}
			}
		}
		select {
		case <-changed:
		case <-ticker.C:
		case <-ctx.Done():
			return
		}
	}
}
