package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/fencing"
	"github.com/converge-go/converge/etcd/leader"
	"github.com/converge-go/converge/etcd/shard"
)

// LeaderView is the view of a leader-only fleet: who leads, what it
// reports, and whether the whole desired set is Done.
type LeaderView struct {
	// Leader is the name of the replica that leads the election now; ""
	// when none does.
	Leader string `json:"leader"`
	// Summary is what the leader published during its term (the same
	// record a sharded replica publishes, without slots).
	Summary shard.Summary `json:"summary"`
	// Done: the leader has published its summary, and it reports no group
	// Pending, Refreshing or in Error, none unowned, no operation in
	// flight and no retry waiting.
	Done bool `json:"done"`
}

// readLeaderView reads the election and the leader's summary in one
// consistent read.
func readLeaderView(ctx context.Context, cli *clientv3.Client, prefix string) (LeaderView, error) {
	resp, err := cli.Txn(ctx).Then(
		clientv3.OpGet(prefix+"/leader/", append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...),
		clientv3.OpGet(prefix+"/leader-summary"),
	).Commit()
	if err != nil {
		return LeaderView{}, fmt.Errorf("read %s: %w", prefix, err)
	}
	var v LeaderView
	if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		v.Leader = string(kvs[0].Value)
	}
	if kvs := resp.Responses[1].GetResponseRange().GetKvs(); len(kvs) > 0 {
		_ = json.Unmarshal(kvs[0].Value, &v.Summary)
	}
	r := v.Summary.Report
	v.Done = v.Leader != "" && v.Summary.Name == v.Leader && r.InFlight == 0 && r.Retries == 0 &&
		r.Objects.Pending == 0 && r.Objects.Refreshing == 0 && r.Objects.Error == 0 && r.Objects.Unowned == 0
	return v, nil
}

// publishLeaderSummary publishes, while this replica leads, its summary at
// Prefix/leader-summary under the term's lease (it vanishes with the
// term), fenced by the term's token: at once when a term starts, then at
// most every interval when the counts change.
func publishLeaderSummary(ctx context.Context, cli *clientv3.Client, e *leader.Elector, o options, rep *reporter) {
	ticker := time.NewTicker(o.summaryEvery)
	defer ticker.Stop()
	var last shard.Summary
	var lastTok fencing.Token
	for {
		changed := e.Changed()
		if tok, ok := e.Token(); ok {
			s := shard.Summary{Name: o.name, Slots: []int{}, Report: rep.report()}
			if tok != lastTok || s.Report != last.Report {
				s.UpdatedAt = time.Now()
				b, _ := json.Marshal(s)
				put := clientv3.OpPut(o.prefix+"/leader-summary", string(b), clientv3.WithLease(tok.Lease))
				if fencing.Do(fencing.WithToken(ctx, tok), cli, put) == nil {
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
