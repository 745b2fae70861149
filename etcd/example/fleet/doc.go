// Command fleet is a fleet controller run as several replicas: the example
// of converge's replicas on etcd (packages leader, shard and fencing of the
// etcd module) with a real remote target.
//
// Operators write the desired instance groups into etcd, one key each:
//
//	/fleet/desired/<group> = {"size": 3, "image": "web:1"}
//
// Every replica keeps them in a statedb table fed by the etcd source
// (package etcdsource) and runs one reconciler over it, whose
// Config.Ownership is a shard.Manager (the default: each replica applies
// the groups of the slots it owns) or, with -leader-only, a
// leader.Elector (the elected replica applies every group; the others
// stand by with their tables fed).
//
// The fleet itself (the target) is simulated in etcd: applying a group
// writes /fleet/target/<group>. Every write is one transaction that
// compares the create revision of the claim the operation runs under (the
// slot's claim key, or the election key) with the fencing token the
// operation's context carries (fencing.Txn): a replica whose claim has
// ended, because it was paused, cut off or handed its slots over, writes
// nothing. The target also records what the fault tests check: an
// operation that found another one running on its group
// (/fleet/overlap/...), a write the fencing check refused
// (/fleet/stale/...), and in each applied group who applied it under which
// token (Applied).
//
// # Subcommands
//
//	fleet [flags]        run one replica until SIGINT or SIGTERM
//	fleet view [flags]   print the cluster-wide view; exit 0 when the
//	                     whole desired set is Done, 1 when not, 2 when
//	                     etcd cannot be read
//
// The etcd client's flags are etcdctl's (--endpoints, --cacert, --cert,
// --key, --user, with the password in --password-file), and so are the
// ETCDCTL_* variables that stand in for them; see client.go and the
// README's "A production etcd" for TLS and authentication.
//
// With -http, a replica also serves GET /view (the same view as JSON: 200
// when Done, 503 when not) and GET /status (its reconciler's status).
// Both modes answer with one shape, shard.View: leader-only, the leader
// publishes its view as a group of one slot that it holds. The view is
// Done only when every owner's counts cover the desired groups as the
// view read them: each replica's summary says which desired revision its
// table holds (report.go).
//
// On its standard output a replica prints "table ready" once its table
// holds the desired set, and "owned N" whenever the number of slots (or
// terms) it owns changes, for scripts and tests.
package main
