// Package statedbcompat bridges cilium/statedb's reconciler package and
// converge, so that an agent can move its reconcilers to converge one at a
// time:
//
//   - Config and the With... options build a converge Config from the
//     incumbent's Register arguments and options, with their meaning (nil
//     limiters and zero intervals included).
//   - Metrics feeds what converge's reconcilers report into the agent's
//     existing implementation of statedb's Metrics.
//   - StatusFromStatedb and StatusToStatedb (and the kind converters)
//     convert statuses losslessly both ways, so that objects keep
//     statedb's Status; GetFromSet and SetInSet read and write one
//     converge reconciler's entry of a statedb StatusSet, so that it can
//     share the set with statedb reconcilers (neither loses work).
//
// statedb's zero Status is Unset and its reconciler leaves such objects
// alone; converge's zero Status is Pending. StatusFromStatedb reads
// statedb's zero value as converge's StatusKindUnset, which converge's
// engine leaves alone in the same way, so objects that keep statedb's
// Status keep statedb's meaning.
//
// It imports github.com/cilium/statedb/reconciler, which it exists to
// bridge to; the rest of converge does not.
package statedbcompat
