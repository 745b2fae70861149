package apiservertest

import "go.uber.org/goleak"

// LeakOptions are the goroutines the API server and client-go leave
// behind for good once started in a process, by function: goleak ignores
// them and nothing else. Add one only with the reason it cannot stop.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		// klog's flush daemon runs for the life of the process.
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	}
}
