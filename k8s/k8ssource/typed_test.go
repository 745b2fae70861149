package k8ssource_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/converge-go/converge/k8s/apiservertest"
	"github.com/converge-go/converge/k8s/k8ssource"
	"github.com/converge-go/converge/source"
)

// A typed clientset's resource goes through Typed, and a label selector
// narrows it: here the CustomResourceDefinitions themselves, a built-in,
// cluster-scoped kind of this API server (keys are plain names).
func TestTypedClientWithSelector(t *testing.T) {
	cs, err := clientset.NewForConfig(cached.Config())
	if err != nil {
		t.Fatal(err)
	}
	var (
		db    *statedb.DB
		table statedb.RWTable[*obj]
	)
	log := hivetest.Logger(t, hivetest.LogLevel(slog.LevelError))
	h := hive.New(statedb.Cell, job.Cell, cell.Provide(cell.NewSimpleHealth),
		cell.Module("typed", "Typed",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(d *statedb.DB, p source.Params) (err error) {
				db = d
				if table, err = statedb.NewTable(db, "crds", keyIndex); err != nil {
					return err
				}
				_, err = k8ssource.New(k8ssource.Config[*apiextensionsv1.CustomResourceDefinition, *obj]{
					Client: k8ssource.Typed[*apiextensionsv1.CustomResourceDefinition, *apiextensionsv1.CustomResourceDefinitionList](
						cs.ApiextensionsV1().CustomResourceDefinitions()),
					ListerWatcherOptions: k8ssource.ListerWatcherOptions{LabelSelector: "converge-test=typed"},
					Transform: func(crd *apiextensionsv1.CustomResourceDefinition) ([]*obj, error) {
						return []*obj{{Key: k8ssource.Key(crd), Value: crd.Spec.Names.Kind}}, nil
					},
					Source: source.Config[*apiextensionsv1.CustomResourceDefinition, *obj]{
						Name: "crds", Table: table,
						Equal: func(a, b *obj) bool { return *a == *b },
					},
				}, p)
				return err
			})))
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := h.Stop(log, context.Background()); err != nil {
			t.Error(err)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	labeled := apiservertest.CRD("typed.converge.dev", "Labeled", "labeleds")
	labeled.Labels = map[string]string{"converge-test": "typed"}
	if err := cached.InstallCRD(ctx, labeled); err != nil {
		t.Fatal(err)
	}
	if err := cached.InstallCRD(ctx, apiservertest.CRD("typed.converge.dev", "Unlabeled", "unlabeleds")); err != nil {
		t.Fatal(err)
	}
	// crdState says where the labeled CRD stands in the API server, for a
	// failure: deleting a CRD waits for the server's cleanup finalizer.
	crdState := func() string {
		got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), labeled.Name, metav1.GetOptions{})
		if err != nil {
			return "the API server: " + err.Error()
		}
		return fmt.Sprintf("the API server holds it: deletionTimestamp %v, finalizers %v, conditions %+v",
			got.DeletionTimestamp, got.Finalizers, got.Status.Conditions)
	}
	waitRows := func(want map[string]string) {
		t.Helper()
		deadline := time.After(waitLimit)
		for {
			txn := db.ReadTxn()
			got := map[string]string{}
			all, watch := table.AllWatch(txn)
			for o := range all {
				got[o.Key] = o.Value
			}
			if equalMaps(got, want) {
				return
			}
			select {
			case <-watch:
			case <-deadline:
				t.Fatalf("table %v, want %v; %s", got, want, crdState())
			}
		}
	}
	waitRows(map[string]string{"labeleds.typed.converge.dev": "Labeled"})
	if err := cs.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, labeled.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRows(map[string]string{})
}
