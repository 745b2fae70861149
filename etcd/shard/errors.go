package shard

import "errors"

var (
	// ErrInvalidConfig wraps every configuration error New returns; the
	// message names the field.
	ErrInvalidConfig = errors.New("shard: invalid config")

	// ErrSlotsMismatch is returned by Run when the group's slot count
	// stored in etcd differs from Config.Slots: replicas that disagree on
	// the slot count would map keys to different slots and so could both
	// own one key.
	ErrSlotsMismatch = errors.New("shard: slot count differs from the group's")

	// ErrHandedOver is the cause of a slot claim's end when the slot was
	// released to its new owner after draining.
	ErrHandedOver = errors.New("shard: slot handed over")

	// ErrDrainTimeout is the cause when a slot's operations did not end
	// within Config.DrainTimeout and were cancelled so that the slot could
	// be released.
	ErrDrainTimeout = errors.New("shard: slot drain timed out")

	// ErrClaimLost is the cause when this replica's claim key of a slot
	// disappeared (deleted by someone else, or expired).
	ErrClaimLost = errors.New("shard: slot claim lost")

	// ErrLeaseInDoubt is the cause when the replica's lease may have
	// expired: no keepalive succeeded for TTL minus SafetyMargin, or one
	// found the lease gone. Every slot ends before the lease can expire.
	ErrLeaseInDoubt = errors.New("shard: lease in doubt")

	// ErrOwnershipChanged is the cause of a Prune's context (Acquire with
	// a nil key) when the slots this replica owns changed while it ran:
	// the objects it was given may no longer match the slots it covers.
	ErrOwnershipChanged = errors.New("shard: owned slots changed during a prune")

	// ErrStopped is the cause when the manager stops: its slots are released
	// by revoking its lease.
	ErrStopped = errors.New("shard: stopped")
)
