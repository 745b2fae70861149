package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/converge-go/converge/benchmarks/internal/bench"
)

// Metric names in a measure.
const (
	metricThroughput = "objects/s"
	metricBytes      = "bytes"
	metricSeconds    = "seconds"
	metricUpdates    = "updates"
	metricP50        = "p50"
	metricP99        = "p99"
	metricMax        = "max"
	metricCPURate    = "cpu-s/s"
	metricHealToDone = "heal-to-done-s"
	metricFromDueP50 = "from-due-p50"
	metricFromDueP99 = "from-due-p99"

	metricCPURateTotal = "cpu-s/s-with-first-pass"
	metricFirstPass    = "first-pass-s"
	metricFailed       = "failed-updates"
	metricCPUPerObject = "cpu-us/object"
)

// Units of rows.
const (
	unitObjectsPerSec = "objects/s"
	unitBytes         = "bytes"
	unitMillis        = "ms"
	unitSeconds       = "s"
	unitCPUPerSec     = "cpu-s/s"
	unitTimes         = "x"

	unitCPUMicrosPerObject = "cpu-µs/object"
	unitCPUMicrosPerChange = "cpu-µs/change"
)

// row is one line of the result: the medians of both sides and their
// ratio, oriented so that above 1 is better for converge.
type row struct {
	Workload string
	Converge float64
	Statedb  float64
	Unit     string
	Ratio    float64
	Runs     int

	// PairsMet of Pairs pairs of runs met the goal, each pair judged on
	// its own runs; zero when the row has no goal.
	PairsMet, Pairs int

	// Reference, when set, says what the statedb column holds instead of
	// statedb's result (the table's own limit).
	Reference string

	lowerBetter bool
	goal        *goal
	met         bool // the goal, by the medians
}

// summarize computes the rows of w from the runs' results.
func summarize(w workload, results map[string][]measure) []row {
	med := func(name, metric string) float64 {
		var xs []float64
		for _, m := range results[name] {
			if x, ok := m[metric]; ok && !math.IsNaN(x) {
				xs = append(xs, x)
			}
		}
		return median(xs)
	}
	var rows []row
	for _, spec := range w.rows {
		r := row{Workload: spec.name, Unit: spec.unit, Reference: spec.reference, lowerBetter: spec.lowerBetter, goal: spec.goal}
		if spec.derive != nil {
			r.Converge, r.Statedb = spec.derive(med)
			r.Runs = runs(results, w.variants)
		} else {
			r.Converge, r.Statedb = med(spec.ours, spec.metric), med(spec.theirs, spec.metric)
			r.Runs = min(len(results[spec.ours]), len(results[spec.theirs]))
			if r.Runs == 0 {
				r.Runs = max(len(results[spec.ours]), len(results[spec.theirs]))
			}
		}
		r.Ratio = r.Converge / r.Statedb
		if spec.lowerBetter {
			r.Ratio = r.Statedb / r.Converge
		}
		if spec.goal != nil {
			r.met = spec.goal.holds(r.Converge, r.Statedb, med)
			r.PairsMet, r.Pairs = pairsMet(spec, results)
		}
		rows = append(rows, r)
	}
	return rows
}

// pairsMet counts the pairs of runs (the i-th run of every variant) in
// which spec's goal is met, and the pairs there were: issue 13 asks for
// the latency goals in every pair, not only in the medians. A derived row
// is derived from each pair's own runs.
func pairsMet(spec rowSpec, results map[string][]measure) (met, pairs int) {
	for i := 0; ; i++ {
		missing := false
		at := func(name, metric string) float64 {
			if i >= len(results[name]) {
				missing = true
				return math.NaN()
			}
			if x, ok := results[name][i][metric]; ok {
				return x
			}
			return math.NaN()
		}
		var ours, theirs float64
		if spec.derive != nil {
			ours, theirs = spec.derive(at)
		} else {
			ours, theirs = at(spec.ours, spec.metric), at(spec.theirs, spec.metric)
		}
		if missing {
			return met, pairs
		}
		pairs++
		if spec.goal.holds(ours, theirs, at) {
			met++
		}
	}
}

// runs is the fewest runs any variant of a workload had.
func runs(results map[string][]measure, variants []variant) int {
	n := math.MaxInt
	for _, v := range variants {
		if len(results[v.name]) > 0 {
			n = min(n, len(results[v.name]))
		}
	}
	if n == math.MaxInt {
		return 0
	}
	return n
}

// median of xs; NaN when xs is empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// String prints a measure in a stable order, for the progress log.
func (m measure) String() string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString("  ")
		}
		fmt.Fprintf(&b, "%s=%.4g", k, m[k])
	}
	return b.String()
}

// writeTable prints the rows as an aligned table.
func writeTable(w io.Writer, rows []row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tconverge\tstatedb\tunit\tratio\truns\ttarget\t")
	for _, r := range rows {
		theirs := formatValue(r.Statedb, r.Unit)
		if r.Reference != "" {
			theirs = r.Reference + ": " + theirs
		}
		target := ""
		if r.goal != nil {
			verdict := "MISSED"
			if r.met {
				verdict = "met"
			}
			target = fmt.Sprintf("%s %s (%d/%d pairs)", r.goal.desc, verdict, r.PairsMet, r.Pairs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t\n",
			r.Workload, formatValue(r.Converge, r.Unit), theirs, r.Unit, formatRatio(r.Ratio), r.Runs, target)
	}
	fmt.Fprintln(tw, "\nratio: converge/statedb for objects/s, statedb/converge for the lower-is-better units; above 1 is better for converge.")
	fmt.Fprintln(tw, "target: met or MISSED by the medians; (k/n pairs): the pairs of runs (the i-th of each side) that met it on their own.")
	return tw.Flush()
}

// writeJSON prints one JSON object per row. A ratio or value that is not
// a number (a side that did not run) is null.
func writeJSON(w io.Writer, rows []row) error {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		out := map[string]any{
			"workload": r.Workload,
			"converge": jsonNumber(r.Converge),
			"statedb":  jsonNumber(r.Statedb),
			"unit":     r.Unit,
			"ratio":    jsonNumber(r.Ratio),
			"runs":     r.Runs,
		}
		if r.Reference != "" {
			out["reference"] = r.Reference
		}
		if r.goal != nil {
			out["goal"] = r.goal.desc
			out["met"] = r.met
			out["pairs_met"], out["pairs"] = r.PairsMet, r.Pairs
		}
		if err := enc.Encode(out); err != nil {
			return err
		}
	}
	return nil
}

func jsonNumber(x float64) any {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return x
}

func formatRatio(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	return fmt.Sprintf("%.2fx", x)
}

// formatValue prints x in its unit, scaled for reading.
func formatValue(x float64, unit string) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	switch unit {
	case unitObjectsPerSec:
		switch {
		case x >= 1e6:
			return fmt.Sprintf("%.3gM", x/1e6)
		case x >= 1e3:
			return fmt.Sprintf("%.3gk", x/1e3)
		}
		return fmt.Sprintf("%.3g", x)
	case unitBytes:
		switch {
		case x >= 1<<30:
			return fmt.Sprintf("%.2fGiB", x/(1<<30))
		case x >= 1<<20:
			return fmt.Sprintf("%.1fMiB", x/(1<<20))
		}
		return fmt.Sprintf("%.0fKiB", x/(1<<10))
	case unitMillis:
		return fmt.Sprintf("%.3f", x)
	case unitTimes:
		return fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.3f", x)
}

// sizesLine describes the sizes of a run above its table.
func sizesLine(s sizes) string {
	return fmt.Sprintf("sizes: noop %s, slow %s (and %d per worker) x %s, latency %s/%s x %d samples (trickle %d), bulk %d x %s, retry %s for %s, full %s, sync-storm %s at %d/s for %s, backlog %s (%d changes alone), hung-target %s for %s; insert batch %d, round size %d",
		countLabel(s.noopObjects), countLabel(s.slowObjects), s.slowPerWorker, s.slowDelay,
		countLabel(s.latencySmall), countLabel(s.latencyLarge), s.latencySamples, s.trickleSamples,
		s.bulkLoads, countLabel(s.bulkObjects),
		countLabel(s.retryObjects), s.retryHeal, countLabel(s.fullObjects),
		countLabel(s.syncObjects), s.syncRate, s.syncDuration,
		countLabel(s.backlogObjects), s.backlogSamples, countLabel(s.hungObjects), s.hungWindow, s.insertBatch, bench.RoundSize) +
		"; " + s.deps.String()
}
