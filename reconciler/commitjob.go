package reconciler

import (
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler/internal/workers"
)

// What a finished operation becomes on its way to the table: its outcome,
// the verdict judged of it, the status write it asks for, and the commit
// job that carries a round of them to the committer and back (commit.go,
// statuswrite.go).

// outcome is what became of one request's attempt.
type outcome[Obj any] struct {
	r       *request[Obj]
	op      Op
	attempt uint64
	err     error            // what the operation returned (ErrTimeout when overdue)
	rev     statedb.Revision // the revision the operation saw
	target  Obj              // the operation's clone, if it had one
	// hasTarget: the operation was given target (else, overdue or a Sync,
	// the status is written into a clone of the object as last read).
	hasTarget bool
	// failures, when set, is the count of failures, this one included,
	// the backoff goes by instead of the request's own: a Sync that
	// failed as a whole backs off by the Syncs failed in a row.
	failures int
	declined obsMask // the observers that declined the attempt
}

// verdict is what an outcome asks for. It holds values only: it waits,
// with its write, while the write is out on the committer.
type verdict[Obj any] struct {
	outcome[Obj]
	failed error  // the failure as the status reports it; nil on success
	giveUp reqWhy // why it is given up on (whyNone: retried)
	write  int    // index of its write in the commit's writes, or -1
}

// statusWrite is one status write into the table.
type statusWrite[Obj any] struct {
	key    string
	obj    Obj              // the object the operation saw (its primary key finds the current one)
	rev    statedb.Revision // its revision
	target Obj              // the copy to write when the object is unchanged
	expect Status           // this reconciler's status the write requires in the table
	status Status           // the status to write
	// fenced is set with Config.Ownership: the write lands only if this
	// replica owns the key when it is made, in the write transaction.
	fenced  bool
	outcome writeOutcome
	// current is this reconciler's status found in the table when the
	// write did not land for want of expect.
	current Status
}

// writeOutcome is what became of a status write.
type writeOutcome uint8

const (
	writeLanded     writeOutcome = iota
	writeSuperseded              // our status is a newer request now, or the object went: the change iterator delivers it
	writeOwed                    // our status is a Done or Error the request did not expect: no newer request follows
	writeNotOwned                // this replica does not own the key (Config.Ownership)
	writeKeyChanged              // SetObjectStatus returned an object with another primary key
)

// commitJob is one commit: the verdicts that wait for their writes, the
// writes, and when it was judged. Only the writes go to the committer.
type commitJob[Obj any] struct {
	verdicts []verdict[Obj]
	writes   []statusWrite[Obj]
	judged   int       // outcomes judged, written or not
	urgent   bool      // holds a lone request's write (ordering.holds)
	oldest   time.Time // when the longest-waiting of them was queued
	at       time.Time // when they were judged
	// committedAt is when its write transaction was committed; ok is
	// false for one aborted at Stop.
	committedAt time.Time
	ok          bool
}

// holdUntil is when a commit held open for more results (ordering.holds)
// is written at the latest: CommitDelay after its first was judged.
func (j *commitJob[Obj]) holdUntil() time.Time { return j.at.Add(workers.CommitDelay) }
