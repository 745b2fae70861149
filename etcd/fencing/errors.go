package fencing

import "errors"

var (
	// ErrNoToken is returned by Guard and Do when the context carries no
	// fencing token: the operation was not started under a claim (for
	// example, the reconciler was not given the Ownership that issues them).
	ErrNoToken = errors.New("fencing: context carries no fencing token")

	// ErrStale is returned by Do when etcd refused the write because the
	// claim the token names no longer holds: ownership moved on, and a write
	// made under the old claim must not be applied.
	ErrStale = errors.New("fencing: stale fencing token, write refused")
)
