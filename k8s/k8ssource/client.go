package k8ssource

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// Object is what a Kubernetes source reads: a typed object (*corev1.Pod,
// a generated CRD type) or *unstructured.Unstructured.
type Object interface {
	runtime.Object
	metav1.Object
}

// Client lists and watches one resource, in one namespace or all. Build
// it with Dynamic (custom resources, any resource by its
// GroupVersionResource) or Typed (a typed clientset's resource
// interface); both functions are plain client-go calls, so a test can also
// fill them in itself.
type Client[T Object] struct {
	// List returns one page of the resource: its items, and the list's
	// metadata (resourceVersion, continue token).
	List func(ctx context.Context, opts metav1.ListOptions) ([]T, metav1.ListMeta, error)
	// Watch opens a watch; its events carry T.
	Watch func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Dynamic returns the Client of a resource through the dynamic client:
// r is client.Resource(gvr), namespace "" means every namespace (and is
// what a cluster-scoped resource needs).
func Dynamic(r dynamic.NamespaceableResourceInterface, namespace string) Client[*unstructured.Unstructured] {
	var ri dynamic.ResourceInterface = r
	if namespace != "" {
		ri = r.Namespace(namespace)
	}
	return Client[*unstructured.Unstructured]{
		List: func(ctx context.Context, opts metav1.ListOptions) ([]*unstructured.Unstructured, metav1.ListMeta, error) {
			l, err := ri.List(ctx, opts)
			if err != nil {
				return nil, metav1.ListMeta{}, err
			}
			items := make([]*unstructured.Unstructured, len(l.Items))
			for i := range l.Items {
				items[i] = &l.Items[i] // no copy: the page is ours
			}
			return items, metav1.ListMeta{ResourceVersion: l.GetResourceVersion(), Continue: l.GetContinue()}, nil
		},
		Watch: ri.Watch,
	}
}

// TypedInterface is the List and Watch of a typed clientset's resource
// interface, for example clientset.CoreV1().ConfigMaps(namespace), whose
// list type is L.
type TypedInterface[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Typed returns the Client of a typed resource interface; T is the
// object type and L its list type:
//
//	k8ssource.Typed[*corev1.ConfigMap, *corev1.ConfigMapList](cs.CoreV1().ConfigMaps(""))
func Typed[T Object, L runtime.Object](ri TypedInterface[L]) Client[T] {
	return Client[T]{
		List: func(ctx context.Context, opts metav1.ListOptions) ([]T, metav1.ListMeta, error) {
			l, err := ri.List(ctx, opts)
			if err != nil {
				return nil, metav1.ListMeta{}, err
			}
			lm, err := meta.ListAccessor(l)
			if err != nil {
				return nil, metav1.ListMeta{}, err
			}
			objs, err := meta.ExtractList(l) // pointers into the page, no copies
			if err != nil {
				return nil, metav1.ListMeta{}, err
			}
			items := make([]T, len(objs))
			for i, o := range objs {
				t, ok := o.(T)
				if !ok {
					return nil, metav1.ListMeta{}, fmt.Errorf("list item is %T, not %T", o, t)
				}
				items[i] = t
			}
			return items, metav1.ListMeta{ResourceVersion: lm.GetResourceVersion(), Continue: lm.GetContinue()}, nil
		},
		Watch: ri.Watch,
	}
}
