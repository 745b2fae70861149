package reconciler

import (
	"fmt"
	"reflect"
)

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
			return fmt.Errorf("%w: reconcilers %q and %q on table %q read and write the same status: "+
				"give each its own (a StatusSet entry per Config.Name), or one would take the other's Done for its own",
				ErrInvalidConfig, other.name, acc.name, acc.table)
		}
	}
	return nil
}

// sharedCheck is a loop's runtime check for a status shared with another
// reconciler on its table. It costs one branch per change once done.
type sharedCheck struct {
	others []statusAccessor // the other reconcilers on the table, as the loop began
	done   bool
	err    error // the conflict found, for health
}

// start takes the other reconcilers registered on table.
func (c *sharedCheck) start(reg *Registry, name, table string) {
	*c = sharedCheck{done: true}
	if reg == nil {
		return
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	for _, acc := range reg.accessors {
		if acc.table == table && acc.name != name {
			c.others = append(c.others, acc)
		}
	}
	c.done = len(c.others) == 0
}

// check looks at obj, whose status as this reconciler reads it is st. A
// Done or Error with a time was written by a reconciler at its own
// moment: another reconciler that reads exactly it from obj shares the
// status. One such object settles the question either way.
func (c *sharedCheck) check(obj any, st Status, name, table string) error {
	if st.Kind != StatusKindDone && st.Kind != StatusKindError || st.UpdatedAt.IsZero() {
		return nil
	}
	c.done = true
	for _, other := range c.others {
		if got, ok := other.get(obj); ok && got.Kind == st.Kind && got.UpdatedAt.Equal(st.UpdatedAt) && got.Error == st.Error && got.ID == st.ID {
			c.err = fmt.Errorf("%w: reconcilers %q and %q on table %q read and write the same status: "+
				"give each its own (a StatusSet entry per Config.Name), or one takes the other's Done for its own",
				ErrInvalidConfig, other.name, name, table)
			return c.err
		}
	}
	return nil
}

// checkShared runs the shared-status check on a change's object while it
// is not done. It reports whether it found a conflict, for health.
func (r *reconciler[Obj]) checkShared(obj Obj, st Status) bool {
	if r.shared.done {
		return false
	}
	err := r.shared.check(obj, st, r.regName, r.cfg.Table.Name())
	if err != nil {
		r.log.Error("Reconciler misconfigured; objects are silently left unreconciled", "error", err)
	}
	return err != nil
}
