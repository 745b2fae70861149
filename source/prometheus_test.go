package source_test

import (
	"strings"
	"testing"

	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/sourcetest"
)

// The Prometheus metrics pass the linter, exist at zero before the first
// event, and count events, relists by reason, writes and errors.
func TestPrometheus(t *testing.T) {
	reg := prometheus.NewRegistry()
	pm, err := source.NewPrometheus(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := source.NewPrometheus(reg); err == nil {
		t.Fatal("a second registration of the same metrics succeeded")
	}
	if _, err := source.NewPrometheus(nil); err != source.ErrNoRegisterer {
		t.Fatalf("nil registerer: got %v", err)
	}
	pm.Source(source.ID{ModuleID: "m", Name: "pre"})
	n, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	// 3 event kinds, 1 commit, 2 write ops, 6 reasons, 3 stages, 2
	// histograms and the lag.
	if want := 3 + 1 + 2 + 6 + 3 + 2 + 1; n != want {
		t.Fatalf("%d series before any event, want %d", n, want)
	}

	st := sourcetest.NewStore[string]()
	st.Set("a", "1")
	st.Set("b", "bad")
	f, src := oneSource(t, st, func(cfg *source.Config[string, *obj]) { cfg.Metrics = pm })
	f.waitTable("list", func(txn statedb.ReadTxn) bool { return f.table.NumObjects(txn) == 1 })
	st.Set("c", "1")
	st.Delete("a")
	f.waitTable("events", func(txn statedb.ReadTxn) bool {
		return mapsEqual(f.contents(txn, ""), map[string]string{"c": "1"})
	})
	waitStatus(t, src, "commit counted", func(s source.StatusSnapshot) bool { return s.Commits > 0 })

	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	expect := `
# HELP converge_source_events_total Events received from the watch, by kind (upsert, delete, bookmark), before coalescing.
# TYPE converge_source_events_total counter
converge_source_events_total{kind="bookmark",module_id="m",name="pre"} 0
converge_source_events_total{kind="bookmark",module_id="test",name="s"} 0
converge_source_events_total{kind="delete",module_id="m",name="pre"} 0
converge_source_events_total{kind="delete",module_id="test",name="s"} 1
converge_source_events_total{kind="upsert",module_id="m",name="pre"} 0
converge_source_events_total{kind="upsert",module_id="test",name="s"} 1
# HELP converge_source_objects_written_total Rows written (op=upsert) or deleted (op=delete) in the table, by events and relists. Unchanged objects are not written.
# TYPE converge_source_objects_written_total counter
converge_source_objects_written_total{module_id="m",name="pre",op="delete"} 0
converge_source_objects_written_total{module_id="m",name="pre",op="upsert"} 0
converge_source_objects_written_total{module_id="test",name="s",op="delete"} 1
converge_source_objects_written_total{module_id="test",name="s",op="upsert"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expect),
		"converge_source_events_total", "converge_source_objects_written_total"); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(mustCounter(t, reg, `converge_source_relists_total`, `reason="initial"`, `name="s"`)); got != 1 {
		t.Fatalf("initial relists %v, want 1", got)
	}
	if got := testutil.ToFloat64(mustCounter(t, reg, `converge_source_errors_total`, `stage="transform"`, `name="s"`)); got < 1 {
		t.Fatalf("transform errors %v, want at least 1", got)
	}
}

// mustCounter finds the one series of name whose labels contain all of
// matchers, as a collector for testutil.ToFloat64.
func mustCounter(t *testing.T, reg *prometheus.Registry, name string, matchers ...string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+`="`+l.GetValue()+`"`)
			}
			all := strings.Join(labels, ",")
			for _, want := range matchers {
				if !strings.Contains(all, want) {
					continue metrics
				}
			}
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "x", Help: "x"}, func() float64 { return m.GetCounter().GetValue() })
		}
	}
	t.Fatalf("no series %s{%s}", name, strings.Join(matchers, ","))
	return nil
}
