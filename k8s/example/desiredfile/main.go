// Command desiredfile is a converge agent driven by a Kubernetes custom
// resource: it keeps a directory holding one file per DesiredFile object
// (crd.yaml), at <namespace>/<spec.path>, and writes each object's Ready
// condition back (with status.observedGeneration, and Stalled while it
// fails, which kstatus reads), so that
//
//	kubectl apply -f crd.yaml
//	kubectl apply -f motd.yaml
//	kubectl wait --for=condition=Ready desiredfile/motd
//	kubectl get desiredfiles
//
// shows, in its Ready and Reason columns, whether each file is written,
// and why not when it is not. Run it with
//
//	go run ./example/desiredfile --kubeconfig ~/.kube/config --dir /tmp/files
//
// (from the k8s module); the hive shell's db/show desired-files and
// source/status show the table and the source.
package main

import (
	_ "embed"
	"fmt"
	"log/slog"
	"os"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/converge-go/converge/k8s/k8ssource"
	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
)

// CRD is the DesiredFile CustomResourceDefinition.
//
//go:embed crd.yaml
var CRD []byte

// desiredFiles is the resource the agent reads.
var desiredFiles = schema.GroupVersionResource{Group: "files.example.converge.dev", Version: "v1", Resource: "desiredfiles"}

// agentConfig is what the agent needs from its command line.
type agentConfig struct {
	Dir       string       // the directory the files are kept in
	Namespace string       // "" watches every namespace
	Rest      *rest.Config // the API server
}

// agentCell is the application: the table, its reconciler onto the
// directory, and the Kubernetes source with status write-back.
func agentCell(cfg agentConfig) cell.Cell {
	return cell.Module("desiredfile", "Keeps a directory of files from DesiredFile objects",
		cell.ProvidePrivate(job.Registry.NewGroup),
		cell.Provide(func(db *statedb.DB) (statedb.RWTable[*File], error) {
			return statedb.NewTable(db, "desired-files", keyIndex)
		}),
		cell.Invoke(func(files statedb.RWTable[*File], rp reconciler.Params, sp source.Params) error {
			dyn, err := dynamic.NewForConfig(cfg.Rest)
			if err != nil {
				return err
			}
			cs, err := kubernetes.NewForConfig(cfg.Rest)
			if err != nil {
				return err
			}
			events := cs.EventsV1()
			rec, err := reconciler.New(reconciler.Config[*File]{
				Table:           files,
				GetObjectStatus: func(f *File) reconciler.Status { return f.Status },
				SetObjectStatus: func(f *File, s reconciler.Status) *File { f.Status = s; return f },
				CloneObject:     func(f *File) *File { c := *f; return &c },
				Operations:      fileOps{dir: cfg.Dir},
			}, rp)
			if err != nil {
				return err
			}
			return k8ssource.Register(k8ssource.Config[*unstructured.Unstructured, *File]{
				Client:    k8ssource.Dynamic(dyn.Resource(desiredFiles), cfg.Namespace),
				Transform: fromDesiredFile,
				Status: &k8ssource.StatusConfig[*unstructured.Unstructured, *File]{
					Client: dyn, Resource: desiredFiles,
					APIVersion: "files.example.converge.dev/v1", Kind: "DesiredFile",
					FieldManager:       "desiredfile-agent",
					ConditionType:      "Ready",
					ObservedGeneration: true,
					Stalled:            true,
					ItemKey:            func(f *File) string { return f.Namespace + "/" + f.Name },
					GetObjectStatus:    func(f *File) reconciler.Status { return f.Status },
					Events:             events,
				},
				// A DesiredFile being deleted stays until its file is
				// removed: a failure to remove it shows in its condition.
				Finalizer: &k8ssource.FinalizerConfig[*File]{
					Name:       "files.example.converge.dev/cleanup",
					Explainers: []k8ssource.Explainer{rec},
					Unset:      func(f *File) *File { f.Status = reconciler.StatusUnset(); return f },
				},
				Source: source.Config[*unstructured.Unstructured, *File]{
					Name:    "desiredfiles",
					Table:   files,
					Equal:   equalFiles,
					Pending: func(f *File) *File { f.Status = reconciler.StatusPending(); return f },
				},
			}, sp)
		}),
	)
}

// newHive is the agent's hive.
func newHive(cfg agentConfig, extra ...cell.Cell) *hive.Hive {
	return hive.New(append([]cell.Cell{
		statedb.Cell, job.Cell, source.Cell,
		cell.Provide(cell.NewSimpleHealth),
		agentCell(cfg),
	}, extra...)...)
}

func main() {
	kubeconfig := pflag.String("kubeconfig", "", "kubeconfig file (default: in-cluster configuration)")
	var cfg agentConfig
	pflag.StringVar(&cfg.Dir, "dir", "files", "directory to keep the files in")
	pflag.StringVar(&cfg.Namespace, "namespace", "", "namespace to watch (default: all)")
	pflag.Parse()
	var err error
	if cfg.Rest, err = clientcmd.BuildConfigFromFlags("", *kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// client-go's default of 5 requests a second would pace the status
	// writes of a few hundred objects.
	cfg.Rest.QPS, cfg.Rest.Burst = 50, 100
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := newHive(cfg).Run(slog.Default()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
