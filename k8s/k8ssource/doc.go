// Package k8ssource feeds a statedb table from a Kubernetes resource, and
// writes each object's reconciliation status back to it as a condition.
//
// It is a source.ListerWatcher over client-go (package source has the
// contract: initialization, atomic relists, no-op suppression, nothing
// dropped, health, metrics and the source/status command), plus the glue
// that registers it, plus an optional status writer. The table is the
// cache: there is no informer store beside it, so a program holds one
// copy of each object, the one it reconciles from.
//
// # Reading
//
// Any resource: a typed clientset's (Typed) or any resource through the
// dynamic client (Dynamic), custom resources included, in one namespace or
// all, selected by labels or fields. The list is a streaming list (a watch
// with sendInitialEvents) where the server supports it, else a list in
// pages at one resourceVersion; the watch resumes from the list's
// resourceVersion, with bookmarks, and from the last one seen after a
// disconnect. A 410 Gone or an expired resourceVersion makes the source
// list again and replace its rows in one transaction. Items are keyed
// "namespace/name".
//
// # Writing status back
//
// With Config.Status set, a job writes one condition (ConditionType,
// "Reconciled" by default; "Ready" with observedGeneration and Stalled for
// kstatus) into each object's status subresource, with server-side apply
// under a field manager of its own: True once every table object the
// Kubernetes object yields is Done (or it yields none), False with the
// error when an operation, a Delete or the Transform failed. So a user can
//
//	kubectl apply -f motd.yaml
//	kubectl wait --for=condition=Ready desiredfile/motd
//
// It reads only the rows its own Transform yielded, checks the CRD with a
// dry run before it writes (a status subresource; conditions a map list
// keyed by type), writes only a changed condition (the first of a new
// generation at once, the rest rate limited per object), records Events,
// and reports any failure as the job's health error, naming the resource
// and the object. With Config.Finalizer it also holds each object until
// the Deletes of its table objects succeeded, as the engine's Explain
// reports them.
//
// Two objects that ask for one table key: the first holds it, the other
// is refused on itself (ReasonConflict, naming the holder) and gets it
// once the holder's claim is cleaned up (claims.go). Config.Secondaries
// names other resources Transform reads (NewSecondary): a change there
// has the objects that read it transformed again. Messages read at most
// 16 KiB of an error, in linear time (message.go).
//
// # Permissions
//
// The source needs list and watch on its resource; the status writer
// patch on its status subresource; the finalizer patch on the resource;
// Events create and patch on events.events.k8s.io. docs/kubernetes.md has
// a least-privilege Role.
package k8ssource
