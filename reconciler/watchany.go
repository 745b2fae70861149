package reconciler

import (
	"reflect"
	"slices"
)

// watchAny wakes the loop when any of several channels closes: a select
// takes a fixed number of cases, and a step reads several required
// tables. Its goroutine waits on the channels it was last armed with.
type watchAny struct {
	armed []<-chan struct{}
	arms  chan []<-chan struct{}
	fired chan struct{}
	quit  chan struct{}
	done  chan struct{}
}

func newWatchAny() *watchAny {
	w := &watchAny{arms: make(chan []<-chan struct{}), fired: make(chan struct{}, 1),
		quit: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// arm has the goroutine wait on chans, unless it waits on them already.
// Once it fired it waits on nothing (armed is nil): its token is in
// fired, or the loop took it (woke).
func (w *watchAny) arm(chans []<-chan struct{}) {
	select {
	case <-w.fired:
		w.armed = nil // the loop is awake already: the token is not needed
	default:
	}
	if w.armed != nil && slices.Equal(w.armed, chans) {
		return
	}
	w.armed = append(w.armed[:0], chans...)
	w.arms <- append([]<-chan struct{}(nil), chans...)
}

// woke records that the loop took the token: the goroutine waits on
// nothing until armed again.
func (w *watchAny) woke() { w.armed = nil }

func (w *watchAny) stop() {
	close(w.quit)
	<-w.done
}

func (w *watchAny) run() {
	defer close(w.done)
	var chans []<-chan struct{}
	for {
		cases := []reflect.SelectCase{
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.quit)},
			{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w.arms)},
		}
		for _, c := range chans {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
		}
		i, v, _ := reflect.Select(cases)
		switch i {
		case 0:
			return
		case 1:
			chans = v.Interface().([]<-chan struct{})
		default:
			chans = nil // closed: wait to be armed again, after the loop reads
			select {
			case w.fired <- struct{}{}:
			default:
			}
		}
	}
}
