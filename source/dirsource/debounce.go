package dirsource

import "time"

// debouncer collects the names that changed until the directory has been
// quiet for wait, or 4*wait has passed since the first change, so that a
// file is read once its writer is done, and a writer that never stops
// still gets its changes applied.
type debouncer struct {
	wait   time.Duration
	names  map[string]struct{}
	rescan bool
	first  time.Time
	timer  *time.Timer
	armed  bool
}

func newDebouncer(wait time.Duration) *debouncer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &debouncer{wait: wait, names: map[string]struct{}{}, timer: t}
}

// add notes a change of name, or of everything with rescan.
func (d *debouncer) add(name string, rescan bool) {
	now := time.Now()
	if rescan {
		d.rescan = true
	} else {
		d.names[name] = struct{}{}
	}
	if !d.armed {
		d.armed, d.first = true, now
	}
	due := now.Add(d.wait)
	if limit := d.first.Add(4 * d.wait); limit.Before(due) {
		due = limit
	}
	d.timer.Reset(due.Sub(now))
}

// fire returns the channel that delivers when the collected changes are
// due, or nil when there are none.
func (d *debouncer) fire() <-chan time.Time {
	if !d.armed {
		return nil
	}
	return d.timer.C
}

// take returns the collected changes and starts over.
func (d *debouncer) take() (map[string]struct{}, bool) {
	names, rescan := d.names, d.rescan
	d.names, d.rescan, d.armed = map[string]struct{}{}, false, false
	return names, rescan
}

func (d *debouncer) stop() { d.timer.Stop() }
