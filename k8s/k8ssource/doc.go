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
// With Config.Status set, a job writes a condition of type Reconciled
// (ConditionType) into each object's status subresource, in the shape the
// Kubernetes API conventions give conditions (status, reason, message,
// observedGeneration, lastTransitionTime), with server-side apply under a
// field manager of its own: True once every table object the Kubernetes
// object yields is Done, False with the error when an operation or the
// Transform failed. So a user can
//
//	kubectl apply -f motd.yaml
//	kubectl wait --for=condition=Reconciled desiredfile/motd
//
// It writes only a changed condition, at most once per StatusConfig
// MinInterval per object (coalescing what happened meanwhile), only for
// the keys StatusConfig.Owns gives this replica, retries conflicts
// quietly, forgets deleted objects, and reports any other failure (a
// Forbidden from RBAC, typically) as the job's health error, naming the
// resource and the object.
//
// # Permissions
//
// The source needs list and watch on its resource; the status writer
// needs patch on the resource's status subresource, for example
//
//	rules:
//	- apiGroups: [files.example.converge.dev]
//	  resources: [desiredfiles]
//	  verbs: [list, watch]
//	- apiGroups: [files.example.converge.dev]
//	  resources: [desiredfiles/status]
//	  verbs: [patch]
//
// client-go's default rest.Config allows 5 requests a second (QPS, Burst
// 10); raise them for a status writer of many objects.
package k8ssource
