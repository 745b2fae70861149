package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/shard"
)

// limits measures what bounds the design's size, for docs/replicas.md: the
// time every replica spends recomputing the assignment at each membership
// change (slots × members rendezvous scores, shard.Assign), and the
// balance it gives (the largest share of slots one member gets, against
// the ideal 1/members).
func limits(o options, log io.Writer) []row {
	var rows []row
	for _, c := range []struct{ slots, members int }{
		{256, 3}, {256, 50}, {4096, 100}, {65536, 100}, {65536, 1000},
	} {
		if c.slots*c.members > o.limitsMax {
			continue
		}
		names := make([]string, c.members)
		for i := range names {
			names[i] = fmt.Sprintf("replica-%d", i)
		}
		owned := map[string]int{}
		start := time.Now()
		for s := range c.slots {
			owned[shard.Assign(s, names)]++
		}
		took := time.Since(start)
		most := 0
		for _, n := range owned {
			most = max(most, n)
		}
		ideal := float64(c.slots) / float64(c.members)
		rows = append(rows, row{
			Name: fmt.Sprintf("limits/assign-%s-slots-%d-members", short(c.slots), c.members), Value: ms(took), Unit: "ms",
			Detail: fmt.Sprintf("per membership change, on every replica; busiest member owns %d slots, %.2fx the ideal %.1f",
				most, float64(most)/ideal, ideal),
		})
		fmt.Fprintf(log, "limits: %d slots over %d members assigned in %v\n", c.slots, c.members, took)
	}
	// An ownership change makes every reconciler look at every object of
	// its table again (reconciler.Ownership): one SlotOf per key.
	keys := make([][]byte, min(1_000_000, o.limitsMax))
	for i := range keys {
		keys[i] = []byte(objectKey(i))
	}
	start := time.Now()
	sum := 0
	for _, k := range keys {
		sum += shard.SlotOf(k, 256)
	}
	took := time.Since(start)
	rows = append(rows, row{Name: fmt.Sprintf("limits/slot-of-%s-keys", short(len(keys))), Value: ms(took), Unit: "ms",
		Detail: fmt.Sprintf("the hashing in the walk of the table each reconciler makes when its owned slots change (%.0f ns a key)",
			float64(took.Nanoseconds())/float64(len(keys)))})
	_ = sum
	return rows
}

// summarySize returns the largest summary a replica of the group at prefix
// published, in bytes.
func summarySize(cli *clientv3.Client, prefix string) (int, error) {
	resp, err := cli.Get(context.Background(), prefix+"/summary/", clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	most := 0
	for _, kv := range resp.Kvs {
		most = max(most, len(kv.Value))
	}
	return most, nil
}

// revisionOf returns etcd's current revision as one read sees it.
func revisionOf(cli *clientv3.Client) (int64, error) {
	resp, err := cli.Get(context.Background(), "/bench/revision-probe")
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// mean returns the mean of xs, NaN for none.
func mean(xs []int64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var sum int64
	for _, x := range xs {
		sum += x
	}
	return float64(sum) / float64(len(xs))
}
