package lease_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/converge-go/converge/k8s/lease"
)

// ShardCell holds the slots while the hive runs; stopping the hive
// releases every slot's Lease and deletes the membership Lease.
func TestShardCell(t *testing.T) {
	group := newLeaseName(t)
	cs, err := kubernetes.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	var s *lease.Sharder
	h := hive.New(job.Cell, cell.Provide(cell.NewSimpleHealth),
		cell.Provide(func() lease.ShardConfig {
			return lease.ShardConfig{Client: cs.CoordinationV1(), Namespace: "lease-test", Name: group, Identity: "a",
				Slots: testSlots, LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod}
		}),
		lease.ShardCell,
		cell.Invoke(func(m *lease.Sharder) { s = m }))
	log := hivetest.Logger(t, hivetest.LogLevel(slog.LevelError))
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	waitOwners(t, []*member{{id: "a", s: s}}, assigned([]string{"a"}))
	if err := h.Stop(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(s.Owned()) != 0 {
		t.Fatalf("a stopped hive's sharder owns %v", s.Owned())
	}
	leases := cs.CoordinationV1().Leases("lease-test")
	ctx := context.Background()
	if _, err := leases.Get(ctx, group+"-m-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the membership lease after stop: %v", err)
	}
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: "converge.dev/shard-group=" + group})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != testSlots {
		t.Errorf("%d leases, want one per slot", len(list.Items))
	}
	for _, l := range list.Items {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			t.Errorf("lease %s still held by %s", l.Name, *l.Spec.HolderIdentity)
		}
	}
}
