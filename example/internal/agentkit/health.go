// Package agentkit is what converge's example agents share: the cell.Health
// that /healthz reads, the HTTP server that starts and stops with the
// hive (every request bounded in time, rebindable Host names refused),
// the operator endpoints (/status, /healthz, /metrics, /debug/vars), and
// the hive shell on a unix socket for the agent's own user (ShellCell).
// Each example adds its own API to the server's mux.
package agentkit

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/script"
)

// HealthCell provides the application's cell.Health and the *Health
// behind it. Every job reports
// into a scope of it (the reconciler's scope is "job-reconcile"), and
// /healthz and the "health" shell command read it back.
//
// hive defines the cell.Health interface but leaves the implementation to
// the application. cell.SimpleHealth cannot list its scopes, which
// /healthz needs, so this is a minimal one that can; a larger agent would
// use its framework's health (Cilium has one with a status tree).
var HealthCell = cell.Provide(
	newHealth,
	func(h *Health) cell.Health { return h.scope("") },
	func(h *Health) hive.ScriptCmdOut { return hive.NewScriptCmd("health", h.scriptCmd()) },
)

// Health holds the latest report of every scope.
type Health struct {
	mu      sync.Mutex
	reports map[string]HealthReport
}

// HealthReport is one scope's latest report.
type HealthReport struct {
	Scope   string
	Level   cell.Level
	Message string
	Err     error
}

// String formats a report for people: "job-reconcile: Degraded: 1
// object(s) failing: a.txt: ...".
func (r HealthReport) String() string {
	s := fmt.Sprintf("%s: %s: %s", r.Scope, r.Level, r.Message)
	if r.Err != nil {
		s += ": " + r.Err.Error()
	}
	return s
}

func newHealth() *Health {
	return &Health{reports: map[string]HealthReport{}}
}

// All returns every scope's latest report, sorted by scope.
func (h *Health) All() []HealthReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]HealthReport, 0, len(h.reports))
	for _, name := range slices.Sorted(maps.Keys(h.reports)) {
		out = append(out, h.reports[name])
	}
	return out
}

// Degraded returns the reports of the degraded scopes, sorted by scope;
// none means healthy.
func (h *Health) Degraded() []HealthReport {
	var out []HealthReport
	for _, r := range h.All() {
		if r.Level == cell.StatusDegraded {
			out = append(out, r)
		}
	}
	return out
}

func (h *Health) scope(name string) *healthScope {
	return &healthScope{root: h, name: name}
}

func (h *Health) set(r HealthReport) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reports[r.Scope] = r
}

// scriptCmd shows every scope's health in the shell.
func (h *Health) scriptCmd() script.Cmd {
	return script.Command(
		script.CmdUsage{Summary: "Show the health of every job"},
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

// healthScope is the cell.Health of one scope: its reports replace the
// scope's previous one.
type healthScope struct {
	root *Health
	name string
}

var _ cell.Health = (*healthScope)(nil)

// OK implements cell.Health.
func (s *healthScope) OK(status string) {
	s.root.set(HealthReport{Scope: s.name, Level: cell.StatusOK, Message: status})
}

// Stopped implements cell.Health.
func (s *healthScope) Stopped(reason string) {
	s.root.set(HealthReport{Scope: s.name, Level: cell.StatusStopped, Message: reason})
}

// Degraded implements cell.Health.
func (s *healthScope) Degraded(reason string, err error) {
	s.root.set(HealthReport{Scope: s.name, Level: cell.StatusDegraded, Message: reason, Err: err})
}

// NewScope implements cell.Health: "a" then "b" is the scope "a.b".
func (s *healthScope) NewScope(name string) cell.Health {
	if s.name != "" {
		name = s.name + "." + name
	}
	return s.root.scope(name)
}

// Close implements cell.Health: the scope's report goes away.
func (s *healthScope) Close() {
	s.root.mu.Lock()
	defer s.root.mu.Unlock()
	delete(s.root.reports, s.name)
}
