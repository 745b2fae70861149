// Package health is a cell.Health for a program's hive that can list what
// every job reported, and the "health" shell command that prints it.
//
// hive defines cell.Health but leaves the implementation to the
// application, and cell.SimpleHealth's script command writes to the log,
// not to the shell's output. Add Cell to a hive that has no health of its
// own: every job, reconcilers included, reports into a scope of it (a
// reconciler's scope is "job-reconcile", or "job-reconcile-<name>"), and
// the shell, or a script test, reads it back with "health":
//
//	hive.New(statedb.Cell, job.Cell, reconciler.Cell, health.Cell, ...)
//
// A larger agent would use its framework's health instead (Cilium has
// one with a status tree).
package health

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/script"
)

// Cell provides the hive's cell.Health, the *Health behind it (for an
// HTTP /healthz, say) and the "health" shell command.
var Cell = cell.Provide(
	New,
	func(h *Health) cell.Health { return h.scope("") },
	func(h *Health) hive.ScriptCmdOut { return hive.NewScriptCmd("health", h.scriptCmd()) },
)

// Health holds the latest report of every scope.
type Health struct {
	mu      sync.Mutex
	reports map[string]Report
}

// Report is one scope's latest report.
type Report struct {
	Scope   string
	Level   cell.Level
	Message string
	Err     error
}

// String formats a report for people: "job-reconcile: Degraded: 1
// object(s) failing: a.txt: ...".
func (r Report) String() string {
	s := fmt.Sprintf("%s: %s: %s", r.Scope, r.Level, r.Message)
	if r.Err != nil {
		s += ": " + r.Err.Error()
	}
	return s
}

// New returns an empty Health; Cell provides one.
func New() *Health {
	return &Health{reports: map[string]Report{}}
}

// All returns every scope's latest report, sorted by scope.
func (h *Health) All() []Report {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Report, 0, len(h.reports))
	for _, name := range slices.Sorted(maps.Keys(h.reports)) {
		out = append(out, h.reports[name])
	}
	return out
}

// Degraded returns the reports of the degraded scopes, sorted by scope;
// none means healthy.
func (h *Health) Degraded() []Report {
	var out []Report
	for _, r := range h.All() {
		if r.Level == cell.StatusDegraded {
			out = append(out, r)
		}
	}
	return out
}

func (h *Health) scope(name string) *scope {
	return &scope{root: h, name: name}
}

func (h *Health) set(r Report) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reports[r.Scope] = r
}

// scriptCmd prints every scope's health, a line each, to the shell's
// output, where a script test matches it with stdout.
func (h *Health) scriptCmd() script.Cmd {
	return script.Command(
		script.CmdUsage{Summary: "Show the health of every job, a line each: scope: level: message[: error]"},
		func(*script.State, ...string) (script.WaitFunc, error) {
			return func(*script.State) (string, string, error) {
				var b []byte
				for _, r := range h.All() {
					b = fmt.Appendln(b, r)
				}
				return string(b), "", nil
			}, nil
		})
}

// scope is the cell.Health of one scope: its reports replace the scope's
// previous one.
type scope struct {
	root *Health
	name string
}

var _ cell.Health = (*scope)(nil)

// OK implements cell.Health.
func (s *scope) OK(status string) {
	s.root.set(Report{Scope: s.name, Level: cell.StatusOK, Message: status})
}

// Stopped implements cell.Health.
func (s *scope) Stopped(reason string) {
	s.root.set(Report{Scope: s.name, Level: cell.StatusStopped, Message: reason})
}

// Degraded implements cell.Health.
func (s *scope) Degraded(reason string, err error) {
	s.root.set(Report{Scope: s.name, Level: cell.StatusDegraded, Message: reason, Err: err})
}

// NewScope implements cell.Health: "a" then "b" is the scope "a.b".
func (s *scope) NewScope(name string) cell.Health {
	if s.name != "" {
		name = s.name + "." + name
	}
	return s.root.scope(name)
}

// Close implements cell.Health: the scope's report goes away.
func (s *scope) Close() {
	s.root.mu.Lock()
	defer s.root.mu.Unlock()
	delete(s.root.reports, s.name)
}
