// Package leader runs reconcilers on one replica at a time: the one elected
// through an etcd election (the protocol of client/v3's
// concurrency.Election: the oldest key under the prefix leads), with every
// operation fenced by the term's token.
//
// # How it works
//
// Every replica runs an Elector (Cell, in a hive). Each campaigns with a
// session lease of Config.TTL. The elected one resumes the reconcilers it
// governs (Govern; construct them with StartSuspended); the others keep
// them suspended but warm: their tables are fed and their outstanding work
// is known, so a new leader starts operations at once. A whole-set
// reconciler whose Config.Ownership is the Elector begins each term it
// wins after another replica's with a Sync whose changes list every
// object: the other leader may have changed the target meanwhile.
//
// The campaign is the elector's own (campaign.go): its wait for the older
// key's delete is a watch that cannot go blind (a member cut off from its
// peers cannot keep it silent; see etcd/internal/watch), and a create of
// its key whose answer was lost is adopted when the key is under its own
// lease. After every campaign the elector checks, in one etcd read, that
// its key still exists with the revision it was created at and is the
// oldest of the election: a campaign can return after its lease expired
// (etcd issue #19597), and such a win is thrown away with a new session.
//
// Prune runs only while leading: Acquire(ctx, nil) gives the term's token
// and is cancelled when the term ends, as for any other operation.
//
// # Fencing
//
// A term's fencing token (fencing.Token) is the election key, its create
// revision and the lease ID. Acquire (the reconciler calls it when its
// Config.Ownership is the Elector), and the Operations wrapper otherwise,
// give each operation a context that carries it; an etcd target checks it
// in the same write with fencing.Do(ctx, cli, ops...), a SQL target as
// package fencing describes.
//
// # Losing leadership
//
// A term ends when the lease is in doubt (a keepalive found it gone, or no
// keepalive has succeeded for TTL - SafetyMargin, which is before the lease
// can expire at the server), when the election key is deleted, or at stop.
// Then, in this order: nothing more is acquired, every operation context of
// the term is cancelled (context.Cause says why), and the governed
// reconcilers are suspended. The session is closed (its lease revoked if
// etcd is reachable) and a new one campaigns.
//
// A clean stop revokes the lease, which deletes the election key, so a
// standby's Campaign returns at once instead of after a TTL.
//
// # What is not guaranteed
//
// Two replicas can believe they lead at once for a short while: a paused
// process notices the end of its term only when it runs again. Only a target
// that checks the token rejects the old leader's writes. Operations that
// touch a target without a check are at-least-once and may overlap.
package leader
