package reconciler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/cilium/hive/cell"
)

// Cell provides the Registry of the application's reconcilers and the
// reconciler/... script commands that inspect and control them (status,
// full, wait, suspend, resume), for txtar tests and the hive shell.
// Reconcilers register themselves when Params carries the Registry, which
// is the case whenever this cell is in the hive.
var Cell = cell.Module(
	"reconciler",
	"Registry and script commands of the reconcilers",
	cell.Provide(NewRegistry, (*Registry).ScriptCommands),
)

// controlled is what the registry needs of a reconciler, whatever its
// object type.
type controlled interface {
	Status() StatusSnapshot
	TriggerFullReconciliation()
	Suspend()
	Resume()
	waitSettled(ctx context.Context) error
	explainText(ctx context.Context, key string) (Explanation, error)
}

// Registry knows every reconciler constructed with Params that carry it.
type Registry struct {
	mu   sync.Mutex
	byID map[string]controlled
	// accessors probe for reconcilers sharing a status (shared.go).
	accessors []statusAccessor
}

// NewRegistry returns an empty registry. Cell provides one; construct your
// own only outside a hive.
func NewRegistry() *Registry {
	return &Registry{byID: map[string]controlled{}}
}

// DisplayName is how script commands and logs name a reconciler:
// "<module>" or "<module>/<name>".
func (id ReconcilerID) DisplayName() string {
	if id.Name == "" {
		return id.ModuleID
	}
	return id.ModuleID + "/" + id.Name
}

func (reg *Registry) add(id ReconcilerID, r controlled, acc statusAccessor) error {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	name := id.DisplayName()
	if _, dup := reg.byID[name]; dup {
		return fmt.Errorf("%w: a reconciler named %q already exists in module %q; set Config.Name to tell them apart",
			ErrInvalidConfig, id.Name, id.ModuleID)
	}
	acc.name = name
	if err := checkStatusOwners(reg.accessors, acc); err != nil {
		return err
	}
	reg.byID[name] = r
	reg.accessors = append(reg.accessors, acc)
	return nil
}

// Names returns the display names of the registered reconcilers, sorted.
func (reg *Registry) Names() []string {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	names := make([]string, 0, len(reg.byID))
	for name := range reg.byID {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// lookup finds reconcilers by display name or by Config.Name; "" matches
// them all.
func (reg *Registry) lookup(name string) ([]controlled, error) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	var found []controlled
	for _, display := range slices.Sorted(maps.Keys(reg.byID)) {
		_, short, _ := strings.Cut(display, "/")
		if name == "" || name == display || name == short {
			found = append(found, reg.byID[display])
		}
	}
	if len(found) == 0 {
		names := slices.Sorted(maps.Keys(reg.byID))
		return nil, fmt.Errorf("no reconciler %q (have: %s)", name, strings.Join(names, ", "))
	}
	return found, nil
}

// Statuses returns the status of every registered reconciler, sorted by
// display name.
func (reg *Registry) Statuses() []StatusSnapshot {
	rs, _ := reg.lookup("")
	out := make([]StatusSnapshot, len(rs))
	for i, r := range rs {
		out[i] = r.Status()
	}
	return out
}
