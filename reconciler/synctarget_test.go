package reconciler_test

import (
	"context"
	"iter"

	"github.com/cilium/hive/script"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// testSyncOps adapts a fake target to SyncOperations: the target takes the
// whole desired set; the keys it skips fail alone.
type testSyncOps struct {
	target *fake.Target
}

func (o *testSyncOps) Sync(ctx context.Context, _ statedb.ReadTxn, desired iter.Seq2[*testObject, statedb.Revision], _ iter.Seq[reconciler.Change[*testObject]]) error {
	objs, failed, err := o.sync(ctx, desired)
	if err != nil {
		return err
	}
	return failObjects(objs, failed)
}

// sync hands the desired set to the target; it returns the objects by key
// and the keys the target skipped.
func (o *testSyncOps) sync(ctx context.Context, desired iter.Seq2[*testObject, statedb.Revision]) (map[string]*testObject, map[string]error, error) {
	want := map[string]string{}
	objs := map[string]*testObject{}
	for obj := range desired {
		want[obj.ID] = obj.Value
		objs[obj.ID] = obj
	}
	failed, err := o.target.Sync(ctx, want)
	return objs, failed, err
}

// failObjects is FailObjects of the skipped keys.
func failObjects(objs map[string]*testObject, failed map[string]error) error {
	var failures []reconciler.ObjectFailure[*testObject]
	for key, err := range failed {
		failures = append(failures, reconciler.ObjectFailure[*testObject]{Object: objs[key], Err: err})
	}
	return reconciler.FailObjects(failures...)
}

// syncShape turns the start command's Config into a whole-set one.
func syncShape(s *script.State, cfg *reconciler.Config[*testObject], target *fake.Target) {
	quiet, _ := s.Flags.GetDuration("quiet")
	maxWait, _ := s.Flags.GetDuration("max-wait")
	refractory, _ := s.Flags.GetDuration("refractory")
	cfg.Operations = nil
	cfg.SyncOperations = &testSyncOps{target: target}
	cfg.SyncDebounce = reconciler.Debounce{Quiet: quiet, MaxWait: maxWait, Refractory: refractory}
	cfg.RoundRateLimiter, cfg.RefreshRateLimiter, cfg.RefreshInterval = nil, nil, 0
}
