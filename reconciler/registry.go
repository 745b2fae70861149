package reconciler

import (
	"context"
	"fmt"
	"maps"
	"reflect"
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

// Two reconcilers on one table must each have a status of their own
// (Config.Name and a StatusSet entry each): if their GetObjectStatus and
// SetObjectStatus read and write the same status, each takes the other's
// Done for its own and objects are silently left unreconciled on one
// target. The Registry detects that at New by writing a probe status
// through the new reconciler's SetObjectStatus, into a zero object, and
// reading it back through every other reconciler's GetObjectStatus on the
// same table. Accessors that panic on a zero object cannot be probed at
// New; then each loop checks the first object it reads that carries a
// status of its own writing (Done or Error, with a time): if another
// reconciler on the table reads the very same status from it, the two
// share it, and health says so, naming both (sharedCheck).

// statusAccessor is what the registry keeps of a reconciler to probe.
type statusAccessor struct {
	name  string
	table string
	// set writes a probe status into a fresh zero object and returns it;
	// get reads a status from such an object. Both report false when the
	// accessors cannot be probed.
	set func(Status) (any, bool)
	get func(any) (Status, bool)
}

// accessorOf returns the probe functions of cfg.
func accessorOf[Obj any](name string, cfg Config[Obj]) statusAccessor {
	zero := func() Obj {
		var obj Obj
		if t := reflect.TypeFor[Obj](); t.Kind() == reflect.Pointer {
			obj = reflect.New(t.Elem()).Interface().(Obj)
		}
		return obj
	}
	return statusAccessor{
		name:  name,
		table: cfg.Table.Name(),
		set: func(s Status) (out any, ok bool) {
			defer func() {
				if recover() != nil {
					ok = false
				}
			}()
			return cfg.SetObjectStatus(cfg.CloneObject(zero()), s), true
		},
		get: func(obj any) (s Status, ok bool) {
			defer func() {
				if recover() != nil {
					ok = false
				}
			}()
			o, ok := obj.(Obj)
			if !ok {
				return Status{}, false
			}
			return cfg.GetObjectStatus(o), true
		},
	}
}

// sharesStatus reports whether a and b read and write the same status.
func sharesStatus(a, b statusAccessor) bool {
	probe := Status{Kind: StatusKindError, Error: "converge: status ownership probe", ID: newStatusID()}
	obj, ok := a.set(probe)
	if !ok {
		return false
	}
	got, ok := b.get(obj)
	return ok && got.ID == probe.ID && got.Error == probe.Error
}

// checkStatusOwners returns an error when acc shares its status with a
// reconciler already registered on the same table.
func checkStatusOwners(existing []statusAccessor, acc statusAccessor) error {
	for _, other := range existing {
		if other.table == acc.table && sharesStatus(acc, other) {
			return sharedStatusError(other.name, acc.name, acc.table)
		}
	}
	return nil
}

// sharedStatusError says that reconcilers a and b on table share a status.
func sharedStatusError(a, b, table string) error {
	return fmt.Errorf("%w: reconcilers %q and %q on table %q read and write the same status: "+
		"give each its own (a StatusSet entry per Config.Name), or one takes the other's Done for its own",
		ErrInvalidConfig, a, b, table)
}

// others returns the accessors of the reconcilers on table but name.
func (reg *Registry) others(name, table string) []statusAccessor {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	var out []statusAccessor
	for _, acc := range reg.accessors {
		if acc.table == table && acc.name != name {
			out = append(out, acc)
		}
	}
	return out
}
