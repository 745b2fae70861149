package fencing_test

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/fencing"
)

type group struct{ Name, Spec string }

type groupsInEtcd struct{ cli *clientv3.Client }

// An operation of a leader-only or sharded reconciler writes to an etcd
// target in one fenced transaction: the write lands only while the claim
// the operation runs under (ctx's token) still holds.
func ExampleDo() {
	var ops groupsInEtcd // with a client
	_ = ops.update
}

func (o groupsInEtcd) update(ctx context.Context, g group) error {
	// ErrStale is an ordinary error to the reconciler: ownership moved
	// on, so the retry does not start here (Acquire says no), and the new
	// owner reconciles the group. Do not make it Permanent: the key may
	// come back to this replica, and must then be reconciled.
	return fencing.Do(ctx, o.cli, clientv3.OpPut("/groups/"+g.Name, g.Spec))
}
