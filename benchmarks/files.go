package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/dirsource"
)

// objectsPerFile is how many objects (YAML documents) each manifest of
// the files workload holds.
const objectsPerFile = 10

// filesLoadGoal is issue 19's goal for loading 10k manifests, in seconds.
const filesLoadGoal = 3.0

// filesWorkload is issue 19's directory source rows: sourceFiles
// manifests of objectsPerFile objects loaded into the table, and single
// file edits (renamed into place) until the file's objects are Done.
func filesWorkload(sz sizes) workload {
	editGoal := float64(dirsource.DefaultDebounce+50*time.Millisecond) / float64(time.Millisecond)
	label := countLabel(sz.sourceFiles)
	run := func(ctx context.Context) (measure, error) { return runFiles(ctx, sz.sourceFiles, sz.fileEdits) }
	atMost := func(ours, goal float64) bool { return ours <= goal }
	return workload{
		name:     "files",
		variants: []variant{{name: "dir", side: sideConverge, run: run}},
		rows: []rowSpec{
			goalRow("files/load-"+label+"-files-"+countLabel(sz.sourceFiles*objectsPerFile)+"-objects", unitSeconds, true, "dir", metricSeconds, filesLoadGoal, "<=3s", atMost),
			goalRow("files/edit-to-done/p50", unitMillis, true, "dir", metricP50, editGoal, "<=debounce+50ms", atMost),
			goalRow("files/edit-to-done/p99", unitMillis, true, "dir", metricP99, editGoal, "<=debounce+50ms", atMost),
		},
	}
}

// manifest writes file i's objects with value v as YAML documents.
func manifest(i int, v string) string {
	var b strings.Builder
	for j := range objectsPerFile {
		fmt.Fprintf(&b, "key: f%05d-%d\nvalue: %s\n---\n", i, j, v)
	}
	return b.String()
}

type benchManifest struct {
	Key   string `yaml:"key"`
	Value string `yaml:"value"`
}

func decodeManifest(_ string, data []byte) ([]*srcObj, error) {
	ms, err := dirsource.DecodeYAML[benchManifest](data)
	if err != nil {
		return nil, err
	}
	objs := make([]*srcObj, len(ms))
	for i, m := range ms {
		objs[i] = &srcObj{Key: m.Key, Value: m.Value}
	}
	return objs, nil
}

// runFiles writes files manifests into a temporary directory, starts a
// directory source (default debounce) and a reconciler, and measures the
// load (from start until the table is initialized), then edits: a random
// file rewritten and renamed into place, timed until its objects are Done
// with the new value.
func runFiles(ctx context.Context, files, edits int) (measure, error) {
	dir, err := os.MkdirTemp("", "converge-files-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for i := range files {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.yaml", i)), []byte(manifest(i, "v0")), 0o644); err != nil {
			return nil, err
		}
	}
	r := newSourceRig(true, func(r *sourceRig, p source.Params) (source.Source, error) {
		return dirsource.New(dirsource.Config[*srcObj]{
			Dir:    dir,
			Decode: decodeManifest,
			Source: source.Config[dirsource.File, *srcObj]{Name: "dir", Table: r.table, Equal: srcEqual, Pending: srcPending},
		}, p)
	})
	began := time.Now()
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	if err := r.waitTable(ctx, func(txn statedb.ReadTxn) bool { init, _ := r.table.Initialized(txn); return init }); err != nil {
		return r.stopped(nil, err)
	}
	load := time.Since(began).Seconds()
	if err := r.settle(ctx); err != nil {
		return r.stopped(nil, err)
	}
	lat := make([]float64, 0, edits)
	for e := range edits {
		i, v := rand.IntN(files), fmt.Sprintf("v%d", e+1)
		path := filepath.Join(dir, fmt.Sprintf("f%05d.yaml", i))
		tmp := filepath.Join(dir, fmt.Sprintf(".f%05d.yaml.tmp", i))
		if err := os.WriteFile(tmp, []byte(manifest(i, v)), 0o644); err != nil {
			return r.stopped(nil, err)
		}
		t0 := time.Now()
		if err := os.Rename(tmp, path); err != nil {
			return r.stopped(nil, err)
		}
		err := r.waitTable(ctx, func(txn statedb.ReadTxn) bool {
			for j := range objectsPerFile {
				o, _, ok := r.table.Get(txn, srcKeyIndex.Query(fmt.Sprintf("f%05d-%d", i, j)))
				if !ok || o.Value != v || o.Status.Kind != reconciler.StatusKindDone {
					return false
				}
			}
			return true
		})
		if err != nil {
			return r.stopped(nil, err)
		}
		lat = append(lat, millisSince(t0))
	}
	m := latencyMeasure(lat)
	m[metricSeconds] = load
	return r.stopped(m, nil)
}
