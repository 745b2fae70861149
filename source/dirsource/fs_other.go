//go:build !linux

package dirsource

// checkFS knows no unreliable filesystems outside Linux.
func checkFS(string, any) error { return nil }

var statfs any
