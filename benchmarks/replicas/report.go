package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"
)

// row is one line of the result.
type row struct {
	Name  string  `json:"row"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// Goal is the goal for the row ("" for a row that only
	// explains another); Met whether Value meets it.
	Goal string `json:"goal,omitempty"`
	Met  *bool  `json:"met,omitempty"`
	// Detail says what else the run saw (spread, counts, CPU).
	Detail string `json:"detail,omitempty"`
}

// atMost and atLeast make a row with a goal.
func atMost(name string, v float64, unit string, limit float64, detail string) row {
	met := v <= limit
	return row{Name: name, Value: v, Unit: unit, Goal: "<= " + num(limit) + " " + unit, Met: &met, Detail: detail}
}

func atLeast(name string, v float64, unit string, limit float64, detail string) row {
	met := v >= limit
	return row{Name: name, Value: v, Unit: unit, Goal: ">= " + num(limit) + " " + unit, Met: &met, Detail: detail}
}

func writeTable(w io.Writer, rows []row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "row\tvalue\tunit\tgoal\t\tdetail")
	for _, r := range rows {
		verdict := ""
		if r.Met != nil {
			verdict = "MISSED"
			if *r.Met {
				verdict = "met"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, num(r.Value), r.Unit, r.Goal, verdict, r.Detail)
	}
	return tw.Flush()
}

func writeJSON(w io.Writer, rows []row) error {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// num prints a number with at most three significant decimals.
func num(x float64) string {
	switch {
	case math.IsNaN(x):
		return "-"
	case x == math.Trunc(x) && math.Abs(x) < 1e15:
		return strconv.FormatInt(int64(x), 10)
	case math.Abs(x) >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case math.Abs(x) >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	default:
		return strconv.FormatFloat(x, 'f', 2, 64)
	}
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// quantile returns the q-quantile of ds (nearest rank); 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
