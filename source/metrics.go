package source

import "time"

// ID names one source: the hive module it runs in and its Config.Name.
type ID struct {
	ModuleID string
	Name     string
}

// DisplayName is how commands, logs and health name a source:
// "<module>/<name>".
func (id ID) DisplayName() string {
	if id.ModuleID == "" {
		return id.Name
	}
	return id.ModuleID + "/" + id.Name
}

// RelistReason says why a source listed.
type RelistReason string

// The reasons for a relist: the values of the metrics' reason label.
const (
	ReasonInitial   RelistReason = "initial"   // the first list
	ReasonExpired   RelistReason = "expired"   // Watch returned ErrExpired
	ReasonOverflow  RelistReason = "overflow"  // Watch returned ErrOverflow
	ReasonReconnect RelistReason = "reconnect" // the watch broke and there was no resume point
	ReasonResync    RelistReason = "resync"    // Config.Resync came due
	ReasonRetry     RelistReason = "retry"     // the previous list failed
)

// RelistReasons lists every RelistReason, in the order metrics create them.
var RelistReasons = []RelistReason{ReasonInitial, ReasonExpired, ReasonOverflow, ReasonReconnect, ReasonResync, ReasonRetry}

// Stage is where an error happened: the values of the metrics' stage label.
type Stage string

// The stages of a source that can fail.
const (
	StageList      Stage = "list"      // ListerWatcher.List failed
	StageWatch     Stage = "watch"     // ListerWatcher.Watch ended with an error
	StageTransform Stage = "transform" // Transform rejected an item, or it hit a row another writer owns
)

// Stages lists every Stage, in the order metrics create them.
var Stages = []Stage{StageList, StageWatch, StageTransform}

// EventKinds lists the kinds of event, in the order metrics create them.
var EventKinds = []EventKind{Upsert, Delete, Bookmark}

// Metrics hands out the metrics of each source. NewPrometheus implements
// it; nil in Config and Params means no metrics.
type Metrics interface {
	// Source returns the metrics of one source; it is called once per
	// source, when it is constructed.
	Source(id ID) SourceMetrics
}

// SourceMetrics receives one source's measurements. Calls come from the
// source's goroutine and from its watcher; implementations must be safe
// for concurrent use and cheap (Event is called for every event).
type SourceMetrics interface {
	// Event counts one event received from the watch.
	Event(kind EventKind)
	// Commit records one batch of events committed: the objects written
	// and deleted, and how long the write transaction took.
	Commit(upserts, deletes int, d time.Duration)
	// Relist records one list and replace, successful or not.
	Relist(reason RelistReason, upserts, deletes int, d time.Duration)
	// Error counts one failure at stage.
	Error(stage Stage)
	// Lag sets the arrival time of the oldest uncommitted event; zero
	// means none is waiting.
	Lag(oldest time.Time)
}

type nopMetrics struct{}

func (nopMetrics) Event(EventKind)                              {}
func (nopMetrics) Commit(int, int, time.Duration)               {}
func (nopMetrics) Relist(RelistReason, int, int, time.Duration) {}
func (nopMetrics) Error(Stage)                                  {}
func (nopMetrics) Lag(time.Time)                                {}
