package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"

	"github.com/converge-go/converge/etcd/etcdsource"
	"github.com/converge-go/converge/reconciler"
)

// Group is one desired instance group: the object of the replica's table.
// Operators write its spec as JSON at Prefix/desired/<Name>; the etcd
// source decodes it into the table, and the reconciler applies it to the
// fleet (Prefix/target/<Name>).
type Group struct {
	// Name is the group's name: the last element of its etcd key, and the
	// table's primary key (the key the shards hash).
	Name string
	// Spec is what the operator asked for.
	Spec Spec
	// Status is this replica's reconciliation status of the group.
	Status reconciler.Status
}

// Spec is the desired state of an instance group, as operators write it.
type Spec struct {
	// Size is the number of instances the group should run.
	Size int `json:"size"`
	// Image is what the instances run.
	Image string `json:"image,omitempty"`
}

// TableHeader and TableRow show groups in the hive shell (db/show).
func (g *Group) TableHeader() []string { return []string{"Name", "Size", "Image", "Status"} }

// TableRow is one group's row in the hive shell.
func (g *Group) TableRow() []string {
	return []string{g.Name, strconv.Itoa(g.Spec.Size), g.Spec.Image, g.Status.Kind.String()}
}

// groupByName is the table's primary index.
var groupByName = statedb.Index[*Group, string]{
	Name:       "name",
	FromObject: func(g *Group) index.KeySet { return index.NewKeySet(index.String(g.Name)) },
	FromKey:    index.String,
	FromString: index.FromString,
	Unique:     true,
}

// newGroupTable creates the table of desired groups.
func newGroupTable(db *statedb.DB) (statedb.RWTable[*Group], error) {
	return statedb.NewTable(db, "groups", groupByName)
}

// decodeGroup turns the etcd key Prefix/desired/<name> into its group. A
// value that is not a valid spec is reported by the source on the key.
func decodeGroup(desired string) func(etcdsource.KeyValue) ([]*Group, error) {
	return func(kv etcdsource.KeyValue) ([]*Group, error) {
		name := strings.TrimPrefix(kv.Key, desired)
		if name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("group name %q: must be non-empty and contain no /", name)
		}
		var s Spec
		if err := json.Unmarshal(kv.Value, &s); err != nil {
			return nil, fmt.Errorf("group %s: %w", name, err)
		}
		if s.Size < 0 {
			return nil, fmt.Errorf("group %s: negative size %d", name, s.Size)
		}
		return []*Group{{Name: name, Spec: s}}, nil
	}
}

func groupStatus(g *Group) reconciler.Status { return g.Status }

func setGroupStatus(g *Group, s reconciler.Status) *Group { g.Status = s; return g }

func cloneGroup(g *Group) *Group { c := *g; return &c }

func groupsEqual(a, b *Group) bool { return a.Name == b.Name && a.Spec == b.Spec }
