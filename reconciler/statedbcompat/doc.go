// Package statedbcompat bridges cilium/statedb's reconciler package and
// converge, so that an agent can move its reconcilers to converge one at a
// time: its existing implementation of statedb's Metrics keeps receiving
// what converge's reconcilers report (Metrics), and a reconciler
// registered with the incumbent's options keeps their meaning (Config and
// the With... options, nil limiters and zero intervals included).
//
// It imports github.com/cilium/statedb/reconciler, which it exists to
// bridge to; the rest of converge does not.
package statedbcompat
