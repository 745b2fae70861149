package apiservertest

import (
	"time"

	"go.uber.org/goleak"
)

// LeakOptions are the goroutines the API server and client-go leave
// behind for good once started in a process, by function: goleak ignores
// them and nothing else. Add one only with the reason it cannot stop.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		// klog's flush daemon runs for the life of the process.
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		// The API server's "log" health check starts, once per process, a
		// goroutine that flushes logs with wait.Forever: by design it
		// never ends. Nothing of converge's runs under wait.Forever.
		goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/util/wait.Forever"),
	}
}

// FindLeaks is goleak.Find with LeakOptions, retried for up to a minute:
// a stopped API server's informers and watch cache end their goroutines
// only after their current backoff or timeout (up to 30 s), not when the
// server's context ends.
func FindLeaks() error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := goleak.Find(LeakOptions()...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
