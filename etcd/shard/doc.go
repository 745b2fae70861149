// Package shard spreads the keys of a reconciled table over several
// replicas, for when one replica cannot keep up. Each key belongs to one of
// a fixed number of slots; each slot is owned by one live replica at a
// time, claimed in etcd and fenced by that claim's token.
//
// # Slots and members
//
// SlotOf maps a primary key to a slot with a stable hash. Every replica
// registers under its lease at Prefix/members/<Name>, watches the group,
// and computes the same assignment of slots to live members with
// rendezvous hashing (Assign): a member joining takes about 1/N of the
// slots, a member leaving gives up only its own.
//
// # Claims and handover
//
// A replica claims a slot it is assigned by creating Prefix/slots/<slot>
// under its lease, only if the key is absent. The key's create revision is
// the slot's fencing token (package fencing): operations started with
// Acquire carry it, and a target checks it in the same write.
//
// When a slot is assigned elsewhere, its owner stops starting operations on
// it (Owns and Acquire say no), waits until every operation in flight has
// been released (or DrainTimeout has passed; then they are cancelled), and
// deletes the claim key. Only then can the new owner create it. A replica
// that dies releases nothing; its claims vanish when its lease expires,
// about TTL later. A clean stop revokes the lease, releasing at once.
//
// When the lease is in doubt (no keepalive succeeded for TTL -
// SafetyMargin, or a keepalive found the lease gone), every slot is dropped and every
// operation's context cancelled before the lease can expire for the others;
// a new session joins again.
//
// # With the reconciler
//
// The Manager is an Ownership: the reconciler asks Owns for every change it
// reads, treats keys it does not own as no work of its own (no counts,
// health, waits or status writes), calls Acquire before each operation and
// release after, and re-reads its keys when Changed fires, reconciling the
// newly owned ones at once whatever their status.
//
// etcd/example/fleet is a complete program: a fleet controller whose
// replicas shard instance groups this way, with an etcd target that checks
// the token in every write.
//
// Whole-set reconcilers (SyncOperations) cannot shard: one Sync covers
// every key. Owns(nil) is always false here; run them under package leader
// instead.
//
// Prune does shard: it is given the objects of the keys this replica owns
// and removes only what belongs to the slots it holds. The engine calls
// Acquire(ctx, nil) before each Prune (ok == false, holding no slot: prune
// nothing) and reads which keys it owns after that; the Prune runs under
// the returned context, which is cancelled (ErrOwnershipChanged) at any
// change of the owned slots, and fences each removal with
// Acquire(pruneCtx, key): that succeeds only for a slot held under the
// claim it was held under when the Prune was acquired, and carries that
// slot's token.
//
// # The cluster-wide view
//
// Each replica publishes a Summary under its lease at Prefix/summary/<Name>:
// the slots it owns and what Config.Report gives: the counts of the owned
// keys and the desired revision they cover. Slot changes are published at
// once, count changes at most every SummaryInterval, so the write rate
// does not depend on the number of objects. ReadView folds the summaries,
// the members and the claims into a View, reading the desired keys in
// pages, keys only, and only as far as the first one newer than the
// summaries cover; ViewHandler serves it over HTTP (200 when done, 503
// otherwise), one read at a time however many clients poll it. The view
// is Done only when every slot is
// claimed by a live member whose summary lists it and was written after
// the claim, no count is outstanding, and every summary covers the
// desired state as the view read it (a summary left by a killed replica,
// or one taken before the changes reached its table, does not).
//
// # Liveness
//
// The group's watch cannot go blind (etcd/internal/watch): it requires an
// etcd leader and asks for progress when silent, so a member cut off from
// its peers cannot hide a leaver or a joiner. Each etcd call of the loop
// requires a leader and is bounded by a second. A claim that etcd applied
// but whose answer was lost is found under this replica's own lease and
// adopted (or released, when the slot is no longer assigned here).
//
// # What is not guaranteed
//
// A replica paused past its lease may still run an operation it started
// before: only a target that checks the token refuses its writes. Balance
// is statistical: with S slots and N members, a member owns S/N on
// average, with a spread of about sqrt(S/N).
package shard
