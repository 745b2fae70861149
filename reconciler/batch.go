package reconciler

import (
	"context"
	"time"
)

// The tasks of more than one object, on a worker like any other: a batch
// of updates or deletes (Config.BatchOperations), and a full
// reconciliation's Prune of the whole set.

func (x *runner[Obj]) runBatch(ctx context.Context, t *task[Obj], overrun func()) []result[Obj] {
	start := time.Now()
	results := make([]result[Obj], len(t.entries))
	batch := make([]BatchEntry[Obj], 0, len(t.entries))
	in := make([]int, 0, len(t.entries)) // results[in[i]] is batch[i]'s
	for i, en := range t.entries {
		results[i] = result[Obj]{op: t.op, key: en.key, row: en.row, attempt: en.attempt, rev: en.rev}
		if x.obs != nil {
			_, results[i].declined = x.obs.attempt(ctx, t.op, &t.entries[i])
		}
	}
	err := x.call(ctx, overrun, t.op, "", 0, func(ctx context.Context) error {
		for i := range t.entries {
			target, err := x.prepare(&t.entries[i])
			if err != nil {
				results[i].err = err
				continue
			}
			results[i].target, results[i].cloned = target, true
			batch = append(batch, BatchEntry[Obj]{Object: target, Revision: t.entries[i].rev})
			in = append(in, i)
		}
		if t.op == OpUpdateBatch {
			x.cfg.BatchOperations.UpdateBatch(ctx, t.txn, batch)
		} else {
			x.cfg.BatchOperations.DeleteBatch(ctx, t.txn, batch)
		}
		return nil
	})
	for i, j := range in {
		results[j].target = batch[i].Object
		results[j].err = safeErr(t.op, batch[i].Result)
	}
	worst := ResultOK
	var counts [len(resultRank)]int
	for i := range results {
		if err != nil && results[i].err == nil {
			results[i].err = err // the whole batch panicked or timed out
		}
		res := x.classify(results[i].err, t.entries[i].failures)
		if x.obs != nil {
			x.obs.finished(t.op, &t.entries[i], res, results[i].err, start, results[i].declined)
		}
		worst = resultRank[max(rankOf(worst), rankOf(res))]
		counts[rankOf(res)]++
	}
	x.metrics.Operation(t.op, worst, 0, time.Since(start))
	for i, n := range counts {
		if n > 0 {
			x.metrics.BatchEntries(t.op, resultRank[i], n)
		}
	}
	return results
}

// runPrune runs a Prune like any other operation, under the claim of the
// whole set, given only the objects of the keys this replica owns.
func (x *runner[Obj]) runPrune(ctx context.Context, t *task[Obj], overrun func()) result[Obj] {
	res := result[Obj]{op: OpPrune, attempt: t.attempt}
	ctx, release, owned := x.claim(ctx, nil)
	if !owned {
		res.notOwned = true // another replica prunes: not a failure
		return res
	}
	defer release()
	start := time.Now()
	res.err = x.call(ctx, overrun, OpPrune, "", 0, func(ctx context.Context) error {
		return x.cfg.Operations.Prune(ctx, t.txn, prunedSet(x.reconciler, t))
	})
	x.metrics.Operation(OpPrune, x.classify(res.err, -1), x.cfg.Table.NumObjects(t.txn), time.Since(start))
	return res
}
