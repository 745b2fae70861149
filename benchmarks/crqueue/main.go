// Command crqueue runs the waiting-order workloads of the converge
// benchmarks (startup+changes, noisy-tenant, hung-target; see
// benchmarks/README.md) on converge's reconciler and on
// controller-runtime's priority queue
// (sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue) driving
// the same fake target with the same number of workers, in alternation,
// and prints a table of medians and ratios in the format of the core
// benchmarks' table.
//
//	go run .                 # every workload, 3 pairs of runs (about 4 minutes on 2 cores)
//	go run . -quick          # smaller sizes, about 30 s
//	go run . -only noisy -json
//
// It is a module of its own so that the core module never requires
// controller-runtime; scripts/bench.sh runs it after the core table.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/converge-go/converge/benchmarks/internal/waitorder"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	sizes      waitorder.Sizes
	pairs      int
	only       *regexp.Regexp
	json       bool
	runTimeout time.Duration
}

// parseFlags parses args. -quick picks waitorder.QuickSizes for every
// size flag not given explicitly.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("crqueue", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	o.sizes = waitorder.FullSizes()
	quick := fs.Bool("quick", false, "shrink every workload so the whole run takes about 30 s")
	only := fs.String("only", "", "run only the workloads whose name matches this `regex`p")
	fs.BoolVar(&o.json, "json", false, "print one JSON object per row instead of the table")
	fs.IntVar(&o.pairs, "pairs", 3, "runs of each side, in alternation")
	fs.DurationVar(&o.runTimeout, "run-timeout", 5*time.Minute, "the most one run may take")
	fs.IntVar(&o.sizes.Backlog, "backlog-objects", o.sizes.Backlog, "startup+changes, noisy-tenant: objects in the backlog")
	fs.IntVar(&o.sizes.Samples, "backlog-samples", o.sizes.Samples, "startup+changes, noisy-tenant: changes measured with no backlog")
	fs.IntVar(&o.sizes.HungObjects, "hung-objects", o.sizes.HungObjects, "hung-target: objects over the four targets")
	fs.DurationVar(&o.sizes.HungWindow, "hung-window", o.sizes.HungWindow, "hung-target: how long the healthy targets' throughput is measured")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if *quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		q := waitorder.QuickSizes()
		for name, p := range map[string]*int{"backlog-objects": &o.sizes.Backlog, "backlog-samples": &o.sizes.Samples, "hung-objects": &o.sizes.HungObjects} {
			if !set[name] {
				*p = *map[string]*int{"backlog-objects": &q.Backlog, "backlog-samples": &q.Samples, "hung-objects": &q.HungObjects}[name]
			}
		}
		if !set["hung-window"] {
			o.sizes.HungWindow = q.HungWindow
		}
	}
	var err error
	if o.only, err = regexp.Compile(*only); err != nil {
		return o, fmt.Errorf("-only: %w", err)
	}
	switch {
	case o.pairs < 1:
		return o, errors.New("-pairs must be at least 1")
	case o.sizes.Backlog < 1 || o.sizes.Samples < 1 || o.sizes.HungObjects < 1:
		return o, errors.New("-backlog-objects, -backlog-samples and -hung-objects must be at least 1")
	case o.sizes.HungWindow <= 0 || o.runTimeout <= 0:
		return o, errors.New("-hung-window and -run-timeout must be positive")
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "crqueue:", err)
		return 2
	}
	fmt.Fprintf(stderr, "converge vs controller-runtime's priority queue: %d pairs per workload, GOMAXPROCS=%d, %s\n",
		o.pairs, runtime.GOMAXPROCS(0), runtime.Version())
	rows, err := runSuite(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "crqueue:", err)
		return 1
	}
	if o.json {
		err = writeJSON(stdout, rows)
	} else {
		s := o.sizes
		fmt.Fprintf(stdout, "sizes: backlog %d (%d changes alone), hung-target %d for %s; %d workers, each Update %s\n",
			s.Backlog, s.Samples, s.HungObjects, s.HungWindow, s.Concurrency, s.Delay)
		err = writeTable(stdout, rows)
	}
	if err != nil {
		fmt.Fprintln(stderr, "crqueue:", err)
		return 1
	}
	return 0
}

// runSuite runs the selected workloads, each side in alternation
// o.pairs times, and returns their rows. Progress goes to log.
func runSuite(o options, log io.Writer) ([]row, error) {
	var rows []row
	for _, w := range workloads(o.sizes) {
		if !o.only.MatchString(w.name) {
			continue
		}
		results := map[string][]map[string]float64{}
		for i := range o.pairs {
			for _, v := range w.variants {
				m, err := runOnce(v, o.runTimeout)
				if err != nil {
					return nil, fmt.Errorf("%s: %s run %d: %w", w.name, v.name, i+1, err)
				}
				results[v.name] = append(results[v.name], m)
				fmt.Fprintf(log, "%-16s %-18s run %d/%d: %s\n", w.name, v.name, i+1, o.pairs, measureString(m))
			}
		}
		rows = append(rows, summarize(w, results)...)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no workload matches -only %q", o.only)
	}
	return rows, nil
}

// runOnce runs one side once, from a collected heap, and fails if a
// goroutine the run started is still running afterwards.
func runOnce(v variant, timeout time.Duration) (map[string]float64, error) {
	debug.FreeOSMemory()
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	m, err := v.run(ctx)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d goroutines left running after the run (%d before)", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return m, nil
}
