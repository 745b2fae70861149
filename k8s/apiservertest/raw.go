package apiservertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// rawWorkers is how many puts PutRaw has in flight.
const rawWorkers = 32

// StorageKey is where the server stores the custom resource ns/name of
// gvr in etcd.
func StorageKey(gvr schema.GroupVersionResource, ns, name string) string {
	return path.Join(StoragePrefix, gvr.Group, gvr.Resource, ns, name)
}

// PutRaw writes custom resources straight into etcd, as the API server
// stores them: the fast way to have many objects present before a test
// starts (creating 100k through the API takes minutes). Each object is
// one etcd transaction of its own, as every API server write is, so that
// each has a resourceVersion of its own; 32 are in flight at once. Each
// object gets a uid and generation 1 if it has none. The API server sees
// them through its etcd watch like any other write.
func (s *Server) PutRaw(ctx context.Context, gvr schema.GroupVersionResource, objs []*unstructured.Unstructured) error {
	type put struct{ key, val string }
	puts := make([]put, len(objs))
	for i, u := range objs {
		if u.GetUID() == "" {
			u.SetUID(types.UID(uuid.NewString()))
		}
		if u.GetGeneration() == 0 {
			u.SetGeneration(1)
		}
		b, err := json.Marshal(u.Object)
		if err != nil {
			return err
		}
		puts[i] = put{StorageKey(gvr, u.GetNamespace(), u.GetName()), string(b)}
	}
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		errs = make([]error, rawWorkers)
	)
	for w := range rawWorkers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(puts) && errs[w] == nil; i = int(next.Add(1)) - 1 {
				if _, err := s.etcdCli.Put(ctx, puts[i].key, puts[i].val); err != nil {
					errs[w] = fmt.Errorf("put raw object %s: %w", puts[i].key, err)
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// DeleteRaw deletes a custom resource straight from etcd.
func (s *Server) DeleteRaw(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) error {
	_, err := s.etcdCli.Delete(ctx, StorageKey(gvr, ns, name))
	return err
}
