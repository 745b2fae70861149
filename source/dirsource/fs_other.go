//go:build !linux

package dirsource

import "os"

// checkFS knows no unreliable filesystems outside Linux.
func checkFS(string, any) error { return nil }

var statfs any

// stampOf takes what a portable stat gives: size, mode and mtime.
func stampOf(fi os.FileInfo) stamp {
	return stamp{size: fi.Size(), mode: fi.Mode(), mtime: fi.ModTime().UnixNano()}
}
