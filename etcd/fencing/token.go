package fencing

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Token identifies one claim of ownership in etcd: the claim key, its create
// revision and the lease it is attached to. Revision is the fencing number:
// a later claim of the same scope always has a higher one.
type Token struct {
	// Key is the etcd key that holds the claim (the election key of a
	// leader, or a slot's claim key).
	Key string
	// Revision is Key's create revision. It is never 0 for a real claim.
	Revision int64
	// Lease is the lease Key is attached to; the claim ends when it expires.
	Lease clientv3.LeaseID
}

// String returns the token in a form for logs.
func (t Token) String() string {
	return fmt.Sprintf("%s@%d/lease=%x", t.Key, t.Revision, int64(t.Lease))
}

// Compare is the etcd comparison that holds while the claim does: Key still
// exists with create revision Revision. It is what concurrency.Mutex's
// IsOwner and Election's Proclaim compare.
func (t Token) Compare() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(t.Key), "=", t.Revision)
}

type tokenKey struct{}

// WithToken returns a context derived from ctx that carries t. Ownership
// implementations call it; operations read it with FromContext.
func WithToken(ctx context.Context, t Token) context.Context {
	return context.WithValue(ctx, tokenKey{}, t)
}

// FromContext returns the token ctx carries, and whether it carries one.
func FromContext(ctx context.Context) (Token, bool) {
	t, ok := ctx.Value(tokenKey{}).(Token)
	return t, ok
}

// Guard returns the comparison that fences a write made under ctx's token,
// to be put in the If of the target's own Txn beside its own conditions.
// It fails with ErrNoToken when ctx carries no token.
func Guard(ctx context.Context) (clientv3.Cmp, error) {
	t, ok := FromContext(ctx)
	if !ok {
		return clientv3.Cmp{}, ErrNoToken
	}
	return t.Compare(), nil
}

// Do applies ops to etcd in one transaction if and only if ctx's claim still
// holds. It returns ErrStale when the claim does not hold (nothing was
// written), ErrNoToken when ctx carries no token, or the client's error.
// The ops and the check are one transaction: there is no window in which
// the claim is lost between the check and the write.
func Do(ctx context.Context, kv clientv3.KV, ops ...clientv3.Op) error {
	_, err := Txn(ctx, kv, nil, ops...)
	return err
}

// Txn is Do with the target's own extra comparisons, all of which must hold
// as well, and the response returned for reading results of the ops. When
// the fencing comparison holds but an extra one does not, nothing is written
// and the response's Succeeded is false with a nil error; when the fencing
// comparison fails, the error is ErrStale.
func Txn(ctx context.Context, kv clientv3.KV, extra []clientv3.Cmp, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	t, ok := FromContext(ctx)
	if !ok {
		return nil, ErrNoToken
	}
	cmps := append([]clientv3.Cmp{t.Compare()}, extra...)
	// On failure, read the claim key alone, to tell a lost claim from a
	// failed extra comparison in the same round trip.
	resp, err := kv.Txn(ctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(t.Key, clientv3.WithKeysOnly())).Commit()
	if err != nil {
		return nil, fmt.Errorf("fenced txn under %s: %w", t, err)
	}
	if resp.Succeeded {
		return resp, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 || kvs[0].CreateRevision != t.Revision {
		return resp, fmt.Errorf("%w: %s", ErrStale, t)
	}
	return resp, nil
}
