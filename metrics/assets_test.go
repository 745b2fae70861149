package metrics_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/converge-go/converge/metrics"
	"github.com/converge-go/converge/reconciler"
)

// exported returns every series name the package exports: the metric
// names, plus _bucket, _sum and _count of the histograms.
func exported() map[string]bool {
	names := map[string]bool{}
	for _, d := range metrics.Definitions() {
		names[d.Name] = true
		if d.Kind == metrics.KindHistogram {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[d.Name+s] = true
			}
		}
	}
	return names
}

// TestMetricsMD keeps METRICS.md true: its table is Definitions, and its
// lists of label values and buckets are the ones in code.
func TestMetricsMD(t *testing.T) {
	data, err := os.ReadFile("METRICS.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []metrics.Definition
	unquote := func(s string) string { return strings.Trim(strings.TrimSpace(s), "`") }
	list := func(s string) []string {
		var out []string
		for _, x := range strings.Split(strings.TrimSuffix(strings.TrimSpace(s), "."), ",") {
			out = append(out, unquote(x))
		}
		return out
	}
	var ops, results []string
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "| `"+metrics.Prefix); ok {
			cells := strings.Split(strings.Trim(rest, "|"), " | ")
			if len(cells) != 4 {
				t.Errorf("METRICS.md: bad row %q", line)
				continue
			}
			rows = append(rows, metrics.Definition{
				Name:   metrics.Prefix + unquote("`"+cells[0]),
				Kind:   metrics.Kind(strings.TrimSpace(cells[1])),
				Labels: list(cells[2]),
				Help:   strings.TrimSpace(cells[3]),
			})
		}
		if rest, ok := strings.CutPrefix(line, "- `op`: "); ok {
			ops = list(rest)
		}
		if rest, ok := strings.CutPrefix(line, "- `result`: "); ok {
			results = list(rest)
		}
	}
	defs := metrics.Definitions()
	if len(rows) != len(defs) {
		t.Errorf("METRICS.md lists %d metrics, the package exports %d", len(rows), len(defs))
	}
	for i := range min(len(rows), len(defs)) {
		if got, want := fmt.Sprintf("%+v", rows[i]), fmt.Sprintf("%+v", defs[i]); got != want {
			t.Errorf("METRICS.md row %d:\n got  %s\n want %s", i+1, got, want)
		}
	}

	var wantOps, wantResults []string
	for _, op := range reconciler.Ops {
		wantOps = append(wantOps, string(op))
	}
	for _, r := range reconciler.Results {
		wantResults = append(wantResults, string(r))
		if !strings.Contains(string(data), "| `"+string(r)+"` | ") {
			t.Errorf("METRICS.md: result %q is not explained", r)
		}
	}
	if !slices.Equal(ops, wantOps) {
		t.Errorf("METRICS.md op values %v, want %v", ops, wantOps)
	}
	if !slices.Equal(results, wantResults) {
		t.Errorf("METRICS.md result values %v, want %v", results, wantResults)
	}

	for name, bounds := range map[string][]float64{
		"DurationBuckets":    metrics.DurationBuckets(),
		"RealizationBuckets": metrics.RealizationBuckets(),
	} {
		var buckets []string
		for _, b := range bounds {
			buckets = append(buckets, strconv.FormatFloat(b, 'f', -1, 64))
		}
		wantBuckets := strings.Join(buckets[:len(buckets)-1], ", ") + " and " + buckets[len(buckets)-1] +
			" seconds (`metrics." + name + "()`)"
		if !strings.Contains(strings.Join(strings.Fields(string(data)), " "), wantBuckets) {
			t.Errorf("METRICS.md does not list the buckets of %s as %q", name, wantBuckets)
		}
	}
}

// alertRule is the part of a Prometheus rule the tests look at.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func readAlerts(t *testing.T) []alertRule {
	t.Helper()
	data, err := os.ReadFile("alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatalf("alerts.yaml: %s", err)
	}
	var rules []alertRule
	for _, g := range file.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// dashboardQuery is one query of dashboard.json, with where it is.
type dashboardQuery struct{ where, expr string }

func readDashboard(t *testing.T) (map[string]any, []dashboardQuery) {
	t.Helper()
	data, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard.json: %s", err)
	}
	var queries []dashboardQuery
	panels, _ := dash["panels"].([]any)
	for _, p := range panels {
		panel, _ := p.(map[string]any)
		targets, _ := panel["targets"].([]any)
		for _, tg := range targets {
			target, _ := tg.(map[string]any)
			if expr, ok := target["expr"].(string); ok {
				queries = append(queries, dashboardQuery{fmt.Sprintf("panel %q", panel["title"]), expr})
			}
		}
	}
	templating, _ := dash["templating"].(map[string]any)
	vars, _ := templating["list"].([]any)
	for _, v := range vars {
		variable, _ := v.(map[string]any)
		if def, ok := variable["definition"].(string); ok {
			queries = append(queries, dashboardQuery{fmt.Sprintf("variable %q", variable["name"]), def})
		}
	}
	return dash, queries
}

var (
	seriesNameRe = regexp.MustCompile(`converge_[a-zA-Z0-9_:]*`)
	matcherRe    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	groupingRe   = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// checkExpr reports the names, labels and label values in expr that the
// package does not export.
func checkExpr(t *testing.T, where, expr string) {
	t.Helper()
	names := exported()
	found := seriesNameRe.FindAllString(expr, -1)
	if len(found) == 0 {
		t.Errorf("%s: no converge metric in %q", where, expr)
	}
	for _, name := range found {
		if !names[name] {
			t.Errorf("%s: %s is not a metric the package exports", where, name)
		}
	}
	labels := map[string][]string{
		metrics.LabelModuleID: nil,
		metrics.LabelName:     nil,
		metrics.LabelOp:       nil,
		metrics.LabelResult:   nil,
		"le":                  nil,
	}
	for _, op := range reconciler.Ops {
		labels[metrics.LabelOp] = append(labels[metrics.LabelOp], string(op))
	}
	for _, r := range reconciler.Results {
		labels[metrics.LabelResult] = append(labels[metrics.LabelResult], string(r))
	}
	for _, m := range matcherRe.FindAllStringSubmatch(expr, -1) {
		label, op, value := m[1], m[2], m[3]
		values, ok := labels[label]
		if !ok {
			t.Errorf("%s: label %q is not one the metrics carry", where, label)
			continue
		}
		if values == nil {
			continue // free-form values
		}
		alternatives := []string{value}
		if op == "=~" || op == "!~" {
			alternatives = strings.Split(value, "|")
		}
		for _, v := range alternatives {
			if !slices.Contains(values, v) {
				t.Errorf("%s: %s=%q is not a value of %s", where, label, v, label)
			}
		}
	}
	for _, m := range groupingRe.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				if _, ok := labels[l]; !ok {
					t.Errorf("%s: grouping label %q is not one the metrics carry", where, l)
				}
			}
		}
	}
}

// TestAlertsUseExportedMetrics checks alerts.yaml against Definitions and
// that every rule can page someone usefully.
func TestAlertsUseExportedMetrics(t *testing.T) {
	rules := readAlerts(t)
	if len(rules) < 4 {
		t.Fatalf("alerts.yaml has %d rules, want at least 4", len(rules))
	}
	used := map[string]bool{}
	for _, r := range rules {
		where := "alert " + r.Alert
		if r.Alert == "" || r.Expr == "" {
			t.Errorf("%s: alert name and expr are required", where)
		}
		checkExpr(t, where, r.Expr)
		for _, name := range seriesNameRe.FindAllString(r.Expr, -1) {
			used[name] = true
		}
		if r.Labels["severity"] == "" {
			t.Errorf("%s: no severity label", where)
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: summary and description annotations are required", where)
		}
	}
	// The alerts the package promises (see METRICS.md and the issue).
	for _, name := range []string{"failing_objects", "oldest_waiting_seconds", "full_reconciliation_failing", "queued_retries",
		"realization_duration_seconds_bucket"} {
		if !used[metrics.Prefix+name] {
			t.Errorf("no alert on %s%s", metrics.Prefix, name)
		}
	}
}

// TestDashboardUsesExportedMetrics checks every query of dashboard.json
// against Definitions.
func TestDashboardUsesExportedMetrics(t *testing.T) {
	dash, queries := readDashboard(t)
	if dash["uid"] == "" || dash["title"] == "" {
		t.Error("dashboard.json: uid and title are required")
	}
	if len(queries) == 0 {
		t.Fatal("dashboard.json has no queries")
	}
	ids := map[float64]bool{}
	for _, p := range dash["panels"].([]any) {
		id, _ := p.(map[string]any)["id"].(float64)
		if ids[id] {
			t.Errorf("dashboard.json: panel id %v used twice", id)
		}
		ids[id] = true
	}
	for _, q := range queries {
		checkExpr(t, q.where, q.expr)
	}
}

// TestDashboardQueriesParse hands every dashboard query, with Grafana's
// variables filled in, to promtool as recording rules, so that a PromQL
// mistake fails the build. It needs promtool (scripts/test.sh installs it).
func TestDashboardQueriesParse(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not in PATH")
	}
	_, queries := readDashboard(t)
	vars := strings.NewReplacer(
		"$__rate_interval", "5m", "$__range", "1h",
		"$module_id", "app", "$name", "routes",
	)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, q := range queries {
		expr := q.expr
		if strings.HasPrefix(expr, "label_values(") {
			// A Grafana function, not PromQL: check its selector.
			expr = strings.TrimPrefix(expr, "label_values(")
			expr = expr[:strings.LastIndex(expr, ",")]
		}
		quoted, _ := json.Marshal(vars.Replace(expr))
		fmt.Fprintf(&b, "      - record: dashboard:query%d\n        expr: %s\n", i, quoted)
	}
	file := filepath.Join(t.TempDir(), "dashboard_rules.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %s\n%s", err, out)
	}
}
