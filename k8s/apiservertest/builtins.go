package apiservertest

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The server has no built-in resources of its own but its CRDs. Two of
// kube-apiserver's are served here as custom resources of the same
// group, version, kind and JSON shape, so that client-go's typed clients
// and the libraries over them work unchanged: Leases (leader election)
// and events.k8s.io Events (client-go's events library). They keep
// everything a custom resource has (resourceVersions, conflicts on
// update, watches, selectors) but not kube-apiserver's validation of
// their fields, nor an Event's time to live.

// approval is the annotation that lets a CRD use a *.k8s.io group.
const approval = "api-approved.kubernetes.io"

// builtinCRD is a namespaced CRD of a group in *.k8s.io whose objects
// keep any field.
func builtinCRD(group, kind, plural string) *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name:        plural + "." + group,
			Annotations: map[string]string{approval: "unapproved, served by apiservertest for tests only"},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
				}},
			}},
		},
	}
}

// InstallLeases serves coordination.k8s.io/v1 Leases, for leader
// election (client-go's tools/leaderelection with a LeaseLock) and
// anything else that takes a Lease.
func (s *Server) InstallLeases(ctx context.Context) error {
	return s.InstallCRD(ctx, builtinCRD("coordination.k8s.io", "Lease", "leases"))
}

// InstallEvents serves events.k8s.io/v1 Events, for client-go's events
// library (tools/events). The transport turns the library's strategic
// merge patches of an event series into merge patches, which custom
// resources accept.
func (s *Server) InstallEvents(ctx context.Context) error {
	return s.InstallCRD(ctx, builtinCRD("events.k8s.io", "Event", "events"))
}
