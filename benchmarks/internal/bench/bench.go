// Package bench holds what every side of every benchmark shares: the engine
// settings both reconcilers default to, spelled out so that a change of
// either default does not silently change a comparison, and the preload
// of a table.
package bench

import (
	"runtime"
	"time"

	"github.com/cilium/statedb"
)

// The settings every side uses where it has them.
const (
	RoundSize       = 1000                   // objects per round
	RoundRate       = 1000                   // rounds per second, burst 1
	RetryBackoffMin = 100 * time.Millisecond // first retry
	RetryBackoffMax = time.Minute            // longest backoff
)

// Preload inserts object(id) for the ids [0, n) into table, in write
// transactions of batch objects: the objects a workload starts with.
func Preload[Obj any](db *statedb.DB, table statedb.RWTable[Obj], n, batch int, object func(id uint64) Obj) error {
	for from := 0; from < n; from += batch {
		wtxn := db.WriteTxn(table)
		for id := from; id < min(from+batch, n); id++ {
			if _, _, err := table.Insert(wtxn, object(uint64(id))); err != nil {
				wtxn.Abort()
				return err
			}
		}
		wtxn.Commit()
	}
	return nil
}

// TotalAlloc is the bytes the process has allocated so far: a workload's
// allocation is the difference across it (the GC's work follows it).
func TotalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}
