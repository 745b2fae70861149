package leader

import "errors"

var (
	// ErrInvalidConfig wraps every configuration error New returns; the
	// message names the field.
	ErrInvalidConfig = errors.New("leader: invalid config")

	// ErrNotLeader is returned by operations wrapped with Operations when
	// this replica is not leading at the moment the operation would start.
	// The reconciler retries it once leadership is back.
	ErrNotLeader = errors.New("leader: not leading")

	// ErrLeadershipLost is the cause of a term's context (and so of every
	// operation context of that term) when leadership ended because the
	// election key is gone: resigned elsewhere, deleted, or expired.
	ErrLeadershipLost = errors.New("leader: leadership lost")

	// ErrLeaseInDoubt is the cause when the session's lease may have
	// expired: its keepalives stopped for TTL minus SafetyMargin, or one
	// found the lease gone. The term ends before the lease can expire for others.
	ErrLeaseInDoubt = errors.New("leader: lease in doubt")

	// ErrStopped is the cause when the elector was stopped (the hive is
	// stopping): leadership is resigned.
	ErrStopped = errors.New("leader: stopped")

	// ErrCampaignStale reports a Campaign that returned although this
	// replica's election key was no longer its own (etcd issue #19597: the
	// lease expired while Campaign waited). The elector starts over with a
	// new session instead of leading.
	ErrCampaignStale = errors.New("leader: campaign won with an expired key")
)
