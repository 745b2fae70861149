package apiservertest

import (
	"context"
	"fmt"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
)

// CRD returns a namespaced CustomResourceDefinition of group and kind,
// version v1, with a status subresource whose conditions are a map list
// keyed by type (as metav1.Condition lists are) beside an
// observedGeneration, a free-form spec, and printer columns for the
// Reconciled condition.
func CRD(group, kind, plural string) *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	obj := func(props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
	}
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	listMap := "map"
	condition := obj(map[string]apiextensionsv1.JSONSchemaProps{
		"type": str, "status": str, "reason": str, "message": str,
		"observedGeneration": {Type: "integer", Format: "int64"},
		"lastTransitionTime": {Type: "string", Format: "date-time"},
	})
	condition.Required = []string{"type", "status"}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", XPreserveUnknownFields: &preserve},
						"status": obj(map[string]apiextensionsv1.JSONSchemaProps{
							"observedGeneration": {Type: "integer", Format: "int64"},
							"conditions": {
								Type:         "array",
								XListType:    &listMap,
								XListMapKeys: []string{"type"},
								Items:        &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &condition},
							},
						}),
					},
				}},
				AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
					{Name: "Reconciled", Type: "string", JSONPath: `.status.conditions[?(@.type=="Reconciled")].status`},
					{Name: "Reason", Type: "string", JSONPath: `.status.conditions[?(@.type=="Reconciled")].reason`},
					{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
				},
			}},
		},
	}
}

// GVR is the resource of a CRD's first version.
func GVR(crd *apiextensionsv1.CustomResourceDefinition) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: crd.Spec.Group, Version: crd.Spec.Versions[0].Name, Resource: crd.Spec.Names.Plural}
}

// InstallCRD creates crd and waits until the server reports it
// Established and its discovery lists the resource of each served version
// (which the server updates a moment after), for at most a minute.
func (s *Server) InstallCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	cs, err := clientset.NewForConfig(s.Config())
	if err != nil {
		return err
	}
	crds := cs.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD %s: %w", crd.Name, err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(s.Config())
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // retried until the deadline
		}
		established := false
		for _, c := range got.Status.Conditions {
			established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
		}
		if !established {
			return false, nil
		}
		for _, v := range got.Spec.Versions {
			if !v.Served {
				continue
			}
			rl, err := dc.ServerResourcesForGroupVersion(got.Spec.Group + "/" + v.Name)
			if err != nil || !slices.ContainsFunc(rl.APIResources, func(r metav1.APIResource) bool { return r.Name == got.Spec.Names.Plural }) {
				return false, nil //nolint:nilerr // not listed yet: retried until the deadline
			}
		}
		return true, nil
	})
}
