package statedbcompat

import (
	sdbreconciler "github.com/cilium/statedb/reconciler"

	"github.com/converge-go/converge/reconciler"
)

// Converters between statedb's Status and converge's, for objects that
// keep statedb's types (a statedb StatusSet that statedb reconcilers
// share, a Status field other code reads): a converge reconciler's
// GetObjectStatus and SetObjectStatus convert on the way in and out.
// Every status either side's constructors make survives a round trip
// through the other side unchanged, kind, time, message and ID.

// StatusKindFromStatedb returns converge's kind for statedb's k: the same
// name, Unset included (converge's Unset means what statedb's does, but is
// not the zero value; the conversion keeps statedb's zero value Unset).
func StatusKindFromStatedb(k sdbreconciler.StatusKind) reconciler.StatusKind {
	switch k {
	case sdbreconciler.StatusKindPending:
		return reconciler.StatusKindPending
	case sdbreconciler.StatusKindRefreshing:
		return reconciler.StatusKindRefreshing
	case sdbreconciler.StatusKindDone:
		return reconciler.StatusKindDone
	case sdbreconciler.StatusKindError:
		return reconciler.StatusKindError
	default:
		// statedb's zero value, and whatever its decoders make of a name
		// they do not know.
		return reconciler.StatusKindUnset
	}
}

// StatusKindToStatedb returns statedb's kind for converge's k: the same
// name. An invalid k (out of range, which only a corrupt object holds)
// becomes Pending, which is what converge's engine makes of it: the
// object is reconciled rather than silently skipped.
func StatusKindToStatedb(k reconciler.StatusKind) sdbreconciler.StatusKind {
	switch k {
	case reconciler.StatusKindRefreshing:
		return sdbreconciler.StatusKindRefreshing
	case reconciler.StatusKindDone:
		return sdbreconciler.StatusKindDone
	case reconciler.StatusKindError:
		return sdbreconciler.StatusKindError
	case reconciler.StatusKindUnset:
		return sdbreconciler.StatusKindUnset
	default:
		return sdbreconciler.StatusKindPending
	}
}

// StatusFromStatedb returns s as converge's Status: the same kind,
// UpdatedAt and ID, and the message of s.Error ("" when nil). statedb's
// Done and Error carry IDs where converge's carry 0; they are kept, so the
// status converts back exactly and converge's engine, which compares IDs
// to tell one request from another, sees what statedb wrote.
func StatusFromStatedb(s sdbreconciler.Status) reconciler.Status {
	return reconciler.Status{
		Kind:      StatusKindFromStatedb(s.Kind),
		UpdatedAt: s.UpdatedAt,
		Error:     s.GetError(),
		ID:        s.ID,
	}
}

// StatusToStatedb returns s as statedb's Status: the same kind, UpdatedAt
// and ID. An Error status always gets a non-nil Error (statedb's
// GetError and String read it), holding s.Error; any other kind gets nil
// unless its message is not empty. (So a statedb status of another kind
// with a non-nil empty Error, which statedb's constructors never make,
// comes back with nil.)
func StatusToStatedb(s reconciler.Status) sdbreconciler.Status {
	out := sdbreconciler.Status{
		Kind:      StatusKindToStatedb(s.Kind),
		UpdatedAt: s.UpdatedAt,
		ID:        s.ID,
	}
	if s.Kind == reconciler.StatusKindError || s.Error != "" {
		msg := s.Error
		out.Error = &msg
	}
	return out
}

// GetFromSet returns name's status in set as converge's, for the
// GetObjectStatus of a converge reconciler whose objects keep a statedb
// StatusSet:
//
//	GetObjectStatus: func(o *Node) reconciler.Status { return statedbcompat.GetFromSet(o.Statuses, "routes") },
//
// A name the set does not hold is Pending with the set's ID (statedb's
// StatusSet.Get): converge relies on that ID to tell another reconciler's
// status write into the set (the same ID) from a new request (a new ID,
// from StatusSet.Pending).
func GetFromSet(set sdbreconciler.StatusSet, name string) reconciler.Status {
	return StatusFromStatedb(set.Get(name))
}

// SetInSet returns a copy of set with name's status set to st, for the
// SetObjectStatus of a converge reconciler whose objects keep a statedb
// StatusSet:
//
//	SetObjectStatus: func(o *Node, st reconciler.Status) *Node {
//		o.Statuses = statedbcompat.SetInSet(o.Statuses, "routes", st)
//		return o
//	},
//
// The statedb reconcilers sharing the set see a status they understand.
func SetInSet(set sdbreconciler.StatusSet, name string, st reconciler.Status) sdbreconciler.StatusSet {
	return set.Set(name, StatusToStatedb(st))
}
