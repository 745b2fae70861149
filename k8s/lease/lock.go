package lease

import (
	"context"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// renewalLock is the Lease lock, which tells the elector of each write
// of a record naming this replica the holder that succeeded, with the
// time it was sent: the renew deadline counts from then.
type renewalLock struct {
	resourcelock.Interface
	identity string
	renewed  func(sent time.Time, rec resourcelock.LeaderElectionRecord)
}

// Create implements resourcelock.Interface.
func (l *renewalLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	err := l.Interface.Create(ctx, rec)
	if err == nil && rec.HolderIdentity == l.identity {
		l.renewed(sent, rec)
	}
	return err
}

// Update implements resourcelock.Interface.
func (l *renewalLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	sent := time.Now()
	err := l.Interface.Update(ctx, rec)
	if err == nil && rec.HolderIdentity == l.identity {
		l.renewed(sent, rec)
	}
	return err
}
