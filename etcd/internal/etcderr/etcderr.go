// Package etcderr tells apart the etcd errors that the coordination code
// of packages leader and shard treats alike.
package etcderr

import (
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Unavailable reports whether err says the member asked could not serve
// the request now (no leader, a reset connection, a member stopping): the
// next member may. A write that failed so may still have been applied.
func Unavailable(err error) bool {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable
	}
	return status.Code(err) == codes.Unavailable
}
