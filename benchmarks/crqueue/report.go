package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// row is one line of the result: the medians of both sides and their
// ratio, oriented so that above 1 is better for converge.
type row struct {
	Workload         string
	Converge, Theirs float64
	Unit             string
	Ratio            float64
	Runs             int
	PairsMet, Pairs  int // pairs of runs (the i-th of each side) whose converge value met the goal
	goal             *goal
}

// summarize computes w's rows from the runs' results, by variant.
func summarize(w workload, results map[string][]map[string]float64) []row {
	var rows []row
	for _, spec := range w.rows {
		r := row{Workload: w.name + "/" + spec.name, Unit: spec.unit, goal: spec.goal,
			Runs: min(len(results[ours]), len(results[theirs]))}
		r.Converge = median(values(results[ours], spec))
		r.Theirs = median(values(results[theirs], spec))
		r.Ratio = r.Converge / r.Theirs
		if spec.lowerBetter {
			r.Ratio = r.Theirs / r.Converge
		}
		if spec.goal != nil {
			for _, x := range values(results[ours], spec) {
				r.Pairs++
				if spec.goal.met(x) {
					r.PairsMet++
				}
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// values is spec's value in each run: its metric, or its metric over
// its over metric.
func values(runs []map[string]float64, spec rowSpec) []float64 {
	var xs []float64
	for _, m := range runs {
		x, ok := m[spec.metric]
		if spec.over != "" {
			x /= m[spec.over]
		}
		if ok && !math.IsNaN(x) && !math.IsInf(x, 0) {
			xs = append(xs, x)
		}
	}
	return xs
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

// measureString prints a run's measure in a stable order, for the
// progress log.
func measureString(m map[string]float64) string {
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

// writeTable prints the rows as an aligned table, in the format of the
// core benchmarks' table.
func writeTable(w io.Writer, rows []row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tconverge\tcontroller-runtime\tunit\tratio\truns\ttarget\t")
	for _, r := range rows {
		target := ""
		if r.goal != nil {
			verdict := "MISSED"
			if r.goal.met(r.Converge) {
				verdict = "met"
			}
			target = fmt.Sprintf("%s %s (%d/%d runs)", r.goal.desc, verdict, r.PairsMet, r.Pairs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t\n", r.Workload, formatValue(r.Converge, r.Unit),
			formatValue(r.Theirs, r.Unit), r.Unit, formatRatio(r.Ratio), r.Runs, target)
	}
	fmt.Fprintln(tw, "\nratio: converge/controller-runtime for objects/s and for hung-target's x, controller-runtime/converge for ms, s and the other x rows; above 1 is better for converge.")
	fmt.Fprintln(tw, "target: converge's goal, met or MISSED by the median; (k/n runs): the runs that met it on their own.")
	return tw.Flush()
}

// writeJSON prints one JSON object per row; a value that is not a number
// is null.
func writeJSON(w io.Writer, rows []row) error {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		out := map[string]any{
			"workload":           r.Workload,
			"converge":           jsonNumber(r.Converge),
			"controller-runtime": jsonNumber(r.Theirs),
			"unit":               r.Unit,
			"ratio":              jsonNumber(r.Ratio),
			"runs":               r.Runs,
		}
		if r.goal != nil {
			out["goal"], out["met"] = r.goal.desc, r.goal.met(r.Converge)
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
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return "-"
	case unit == unitObjectsPerSec && x >= 1e3:
		return fmt.Sprintf("%.3gk", x/1e3)
	case unit == unitObjectsPerSec:
		return fmt.Sprintf("%.3g", x)
	case unit == unitTimes:
		return fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.3f", x)
}
