// Command firewall is a converge agent for a whole-set target: it keeps an
// nftables table of allowed ports in sync with a statedb table of desired
// rules, with converge's whole-set reconciler (Config.SyncOperations). It
// needs root (nft, and creating a network namespace).
//
// Run it from the repository root, and in another terminal:
//
//	$ curl -X PUT localhost:8082/rules/ssh -d '{"protocol": "tcp", "port": 22, "comment": "ssh"}'
//	$ curl -X PUT localhost:8082/rules/web -d '{"protocol": "tcp", "port": 8000, "end_port": 8099}'
//	$ curl localhost:8082/ruleset        # the table, as nft lists it in the namespace
//	$ curl localhost:8082/rules          # each rule with its status: Done
//
// By default the table lives in a private network namespace the program
// creates and that goes away with it, so the host's firewall is never
// touched. The log names a path to enter it (nsenter --net=PATH nft list
// ruleset). With --netns it uses an existing namespace instead (sudo ip
// netns add fw; --netns /run/netns/fw), where "ip netns exec fw nft ..."
// can change the table behind its back to see it repaired.
//
// # What it shows
//
// A whole-set target takes the entire desired state at once. Here every
// Sync renders the whole ruleset from one snapshot of the table, has nft
// check it (nft -c), and loads it with one nft -f that nft applies in one
// transaction: the script declares the table, deletes it and declares it
// anew, so a packet never sees half a ruleset, and whatever was changed in
// the table behind the program's back is gone. Only that table is touched.
// Changes are debounced (a burst of PUTs is one Sync), and a Sync runs at
// every full reconciliation (--full-reconciliation-interval) too, which is
// what repairs drift.
//
// One bad rule must not keep the others out. A rule that fails
// validation (RuleSpec.Validate: a port out of range, an unknown
// protocol, a comment that could break out of its quotes) is left out of
// the ruleset; so is a rule nft itself rejects (its own limits, such as a
// comment over 128 bytes): nft names the line of each error, and the
// renderer knows which rule is on which line; when nft names no line,
// each rule is checked on its own. Those rules are failed alone with
// reconciler.FailObjects, and the rest are applied. Their status says
// why, /healthz reports them, and they are not retried until they change.
//
//   - rule.go: the object (Rule: name, protocol, ports, comment, status),
//     its table, indexes, and Validate.
//   - render.go: the whole ruleset from the valid rules.
//   - ops.go and locate.go: Sync, and finding the rules nft rejects.
//   - nft.go and netns.go: running nft in a network namespace, from an OS
//     thread that enters it and exits afterwards, so that the program
//     itself never leaves its own namespace.
//   - reconcile.go: the namespace and the reconciler.Config.
//   - desired.go, api.go, server.go: the HTTP API (PUT, DELETE, GET rules,
//     GET /ruleset), and the operator endpoints of internal/agentkit:
//     /status, /healthz, /metrics, /debug/vars.
//   - config.go and main.go: the flags (--help lists them), the hive and
//     the command line; "go run ./example/firewall shell" opens the hive
//     shell of a running agent.
//
// The desired rules live in memory: a restart begins with none.
package main
