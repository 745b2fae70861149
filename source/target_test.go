package source_test

import (
	"context"
	"iter"
	"maps"
	"sync"

	"github.com/cilium/statedb"
)

// memTarget is the outside world: it outlives the agent's processes.
type memTarget struct {
	mu   sync.Mutex
	objs map[string]string
}

func (tg *memTarget) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, o *obj) error {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.objs[o.Key] = o.Value
	return nil
}

func (tg *memTarget) Delete(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, o *obj) error {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	delete(tg.objs, o.Key)
	return nil
}

func (tg *memTarget) Prune(_ context.Context, _ statedb.ReadTxn, objs iter.Seq2[*obj, statedb.Revision]) error {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	keep := map[string]bool{}
	for o := range objs {
		keep[o.Key] = true
	}
	for k := range tg.objs {
		if !keep[k] {
			delete(tg.objs, k)
		}
	}
	return nil
}

func (tg *memTarget) snapshot() map[string]string {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return maps.Clone(tg.objs)
}
