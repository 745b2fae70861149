package main

import (
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// desiredRules is the desired set of rules, for the API: it reads the
// desired-rules table and writes rules into it; the reconciler writes
// their statuses. The set lives in memory only: a restart begins with no
// rules (and, in a private namespace, with no table either).
type desiredRules struct {
	db    *statedb.DB
	rules statedb.RWTable[*Rule]
}

// newDesiredRules registers the table's initializer and completes it when
// the hive starts. The first Sync waits until every initializer of the
// table is done, so that a table still being filled never replaces the
// ruleset with part of it. Here the initial set is empty (it lives in
// memory); a program that keeps its rules somewhere would insert them at
// start and complete the initializer in the same transaction.
func newDesiredRules(lc cell.Lifecycle, db *statedb.DB, rules statedb.RWTable[*Rule]) *desiredRules {
	wtxn := db.WriteTxn(rules)
	loaded := rules.RegisterInitializer(wtxn, "desired-rules")
	wtxn.Commit()
	lc.Append(cell.Hook{OnStart: func(cell.HookContext) error {
		wtxn := db.WriteTxn(rules)
		loaded(wtxn)
		wtxn.Commit()
		return nil
	}})
	return &desiredRules{db: db, rules: rules}
}

// List returns every desired rule with its status, sorted by name.
func (d *desiredRules) List() []*Rule {
	rules := []*Rule{}
	for r := range d.rules.All(d.db.ReadTxn()) {
		rules = append(rules, r)
	}
	return rules
}

// Get returns the named desired rule with its status.
func (d *desiredRules) Get(name string) (*Rule, bool) {
	r, _, found := d.rules.Get(d.db.ReadTxn(), nameIndex.Query(name))
	return r, found
}

// Put makes spec desired: it inserts it into the table, Pending, and
// returns the rule as stored and whether it is new. Putting what is
// already desired changes nothing, unless the rule is in Error: then it is
// tried again at the next Sync. spec should be valid (RuleSpec.Validate);
// if it is not, the reconciler reports it on the rule.
func (d *desiredRules) Put(spec RuleSpec) (r *Rule, created bool, err error) {
	wtxn := d.db.WriteTxn(d.rules)
	defer wtxn.Abort()
	old, _, found := d.rules.Get(wtxn, nameIndex.Query(spec.Name))
	if found && old.RuleSpec == spec && old.Status.Kind != reconciler.StatusKindError {
		return old, false, nil
	}
	r = &Rule{RuleSpec: spec, Status: reconciler.StatusPending()}
	if _, _, err := d.rules.Insert(wtxn, r); err != nil {
		return nil, false, err
	}
	wtxn.Commit()
	return r, !found, nil
}

// Delete makes the named rule undesired; the next Sync leaves it out of
// the ruleset. It reports whether the rule was desired.
func (d *desiredRules) Delete(name string) (found bool, err error) {
	wtxn := d.db.WriteTxn(d.rules)
	defer wtxn.Abort()
	old, _, found := d.rules.Get(wtxn, nameIndex.Query(name))
	if !found {
		return false, nil
	}
	if _, _, err := d.rules.Delete(wtxn, old); err != nil {
		return false, err
	}
	wtxn.Commit()
	return true, nil
}
