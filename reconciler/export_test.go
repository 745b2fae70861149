package reconciler

// SetForcePipelined makes every commit with writes go through the committer
// goroutine (or stops it) and returns the previous setting: the model test
// runs some seeds this way, so that requests wait in stCommitting on every
// commit, exposed to every change that may come meanwhile.
func SetForcePipelined(on bool) bool { return forcePipelined.Swap(on) }
