// Package fencing carries the fencing token of an ownership claim in etcd
// (leadership, or one slot of a sharded reconciler) to the operations that
// act under it, and checks it at the target in the same write.
//
// A lease does not by itself give a single owner: a replica that is paused
// (GC, a stalled VM, a partition) can still believe it owns something after
// its lease expired and another replica claimed it. The target must reject
// such a replica's writes. The token is what it checks: the etcd key that
// holds the claim, that key's create revision, and the lease the key is
// attached to. A key's create revision changes whenever the claim is made
// anew, and a later claim always has a higher one, so the revision is a
// monotonic fencing number.
//
// # An etcd target
//
// An operation that writes to etcd guards the write with the claim in the
// same transaction, in one line:
//
//	err := fencing.Do(ctx, cli, clientv3.OpPut(key, value))
//
// Do fails with ErrStale when the claim has been lost (the claim key was
// deleted, or made anew by someone else), and with ErrNoToken when ctx
// carries no token. Guard returns the comparison alone, to be combined with
// the target's own conditions in one Txn.
//
// # A SQL target
//
// A database cannot see etcd, so it keeps the highest token it has accepted
// per fenced scope (the whole target for leader-only, one row per slot when
// sharded) and accepts a write only with a token at least as high, in the
// same transaction as the write:
//
//	BEGIN;
//	-- takes the scope's row lock; refuses a token lower than the last one
//	INSERT INTO fence (scope, token) VALUES ($2, $1)
//	  ON CONFLICT (scope) DO UPDATE SET token = EXCLUDED.token
//	  WHERE fence.token <= EXCLUDED.token;
//	-- 0 rows affected: a newer owner has written; ROLLBACK, report ErrStale
//	UPDATE instance_groups SET size = $3 WHERE name = $4;
//	COMMIT;
//
// with $1 = Token.Revision. The row lock orders the writes of the old and
// the new owner, and once the new owner has written, the old one's token is
// lower and every write of its is refused. A write of the old owner that
// commits before the new owner's first write is not stale: it happened
// while no newer owner had acted.
package fencing
