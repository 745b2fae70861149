// Package lease runs reconcilers on one replica at a time (Elector), or
// splits their keys between replicas (Sharder), with Kubernetes Leases
// (coordination.k8s.io/v1), so that a program running in a pod needs
// nothing but its API server, not etcd. The Elector elects its leader as
// controller-runtime's manager does: client-go's tools/leaderelection.
//
// An Elector is a reconciler.Ownership: set it as the engine's
// Config.Ownership (and the status writer's Owns and OwnsChanged), run it
// (Run, or Cell in a hive), and only the replica that holds the Lease
// starts operations, each under a context that carries the term's fencing
// Token and is cancelled when the term ends. The others keep their tables
// fed and their outstanding work known, and start at once when they win.
//
// # When a term ends
//
// A term ends when a renewal of the Lease has not succeeded for
// RenewDeadline, counted from when the last successful renewal was sent:
// before the Lease can have expired for the other replicas, which count
// LeaseDuration from when they saw that renewal, which was after it was
// sent. From then on Owns is false, Acquire refuses, and every operation
// context of the term is cancelled. The margin LeaseDuration -
// RenewDeadline must cover the time operations take to notice their
// cancelled context, and the clocks' rate error. A clean stop (the end of
// Run's context) lets operations end, then gives the Lease up, so that a
// standby takes over at once rather than after LeaseDuration.
//
// # What a Lease cannot fence
//
// A Lease is advisory: the API server does not stop an old leader from
// acting, and a target cannot ask the Lease whether a write comes from the
// current leader. A process paused (a long GC, a frozen VM, a SIGSTOP)
// after it checked Owns, or in the middle of an operation, acts when it
// runs again, possibly after another replica took over; its timers fire
// late. Nothing in the process can prevent that. What the package does:
// it stops at the renew deadline, before the Lease can expire, which
// covers every replica that keeps running (a partition from the API
// server included); and it gives each operation a fencing Token
// (TokenFrom): the Lease's holder and its leaderTransitions, which grows
// by one whenever the holder changes. A target that can compare (a
// database row, a versioned object) keeps the highest token it has
// accepted and refuses a lower one, which fences a paused leader too.
// Operations on a target that cannot compare are at-least-once and may
// overlap for as long as a pause lasts.
//
// # Sharding
//
// A Sharder splits the keys between replicas instead (NewSharder, Run, or
// ShardCell in a hive): each replica renews a membership Lease
// (Name-m-<Identity>), every replica computes the same rendezvous
// assignment of Slots slots to the live members (the hash and assignment
// of the etcd module's shard package), and a replica owns a slot once it
// has written itself the holder of the slot's Lease (Name-s-<n>) with a
// compare-and-swap on its resourceVersion, which gives one holder at a
// time. It takes a slot only when the Lease is free, its own, or held by a
// member whose membership Lease it has seen unchanged for LeaseDuration. A
// replica owns nothing once its membership has not been renewed for
// RenewDeadline (a renewal counts only if it came back within
// LeaseDuration - RenewDeadline), before any other can find it expired; a
// slot that moves is drained (DrainTimeout) and released before its new
// owner can claim it. The slot's Token is its Lease, holder and
// leaseTransitions, one higher at every claim. The same limits as above
// apply: what a Lease cannot fence is in docs/replicas.md.
package lease
