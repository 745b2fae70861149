// Package crtest checks that controller-runtime, as its users set it up,
// works against the k8s module's in-process API server
// (k8s/apiservertest): its client's discovery and RESTMapper, reads,
// writes and the status subresource. It is a module of its own so that
// controller-runtime stays out of the k8s module's requirements.
package crtest
