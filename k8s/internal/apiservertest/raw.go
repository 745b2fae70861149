package apiservertest

import (
	"context"
	"encoding/json"
	"fmt"
	"path"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// rawBatch is how many objects one etcd transaction writes: etcd's
// default limit of operations per transaction is 128.
const rawBatch = 100

// StorageKey is where the server stores the custom resource ns/name of
// gvr in etcd.
func StorageKey(gvr schema.GroupVersionResource, ns, name string) string {
	return path.Join(StoragePrefix, gvr.Group, gvr.Resource, ns, name)
}

// PutRaw writes custom resources straight into etcd, as the API server
// stores them, in transactions of 100: the fast way to have many objects
// present before a test starts (creating 100k through the API takes
// minutes). Each object gets a uid and generation 1 if it has none. The
// API server sees them through its etcd watch like any other write.
func (s *Server) PutRaw(ctx context.Context, gvr schema.GroupVersionResource, objs []*unstructured.Unstructured) error {
	for start := 0; start < len(objs); start += rawBatch {
		var ops []clientv3.Op
		for _, u := range objs[start:min(start+rawBatch, len(objs))] {
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
			ops = append(ops, clientv3.OpPut(StorageKey(gvr, u.GetNamespace(), u.GetName()), string(b)))
		}
		if _, err := s.etcdCli.Txn(ctx).Then(ops...).Commit(); err != nil {
			return fmt.Errorf("put raw objects: %w", err)
		}
	}
	return nil
}

// DeleteRaw deletes a custom resource straight from etcd.
func (s *Server) DeleteRaw(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) error {
	_, err := s.etcdCli.Delete(ctx, StorageKey(gvr, ns, name))
	return err
}
