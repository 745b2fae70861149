package dirsource

import (
	"fmt"
	"os"
	"syscall"
)

// unreliableFS names the filesystems, by statfs magic number, on which
// inotify only sees changes made through the local kernel.
var unreliableFS = map[int64]string{
	0x6969:     "nfs",
	0xff534d42: "cifs",
	0xfe534d42: "smb2",
	0x517b:     "smb",
	0x65735546: "fuse",
	0x01021997: "9p",
	0x47504653: "gpfs",
	0x0bd00bd0: "lustre",
}

// checkFS fails with ErrUnsupportedFS when dir is on a filesystem in
// unreliableFS.
func checkFS(dir string, statfs func(string, *syscall.Statfs_t) error) error {
	var st syscall.Statfs_t
	if err := statfs(dir, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	if name, bad := unreliableFS[int64(st.Type)]; bad {
		return fmt.Errorf("%s is on %s: %w: inotify misses changes made elsewhere; use a local directory", dir, name, ErrUnsupportedFS)
	}
	return nil
}

func statfs(dir string, st *syscall.Statfs_t) error { return syscall.Statfs(dir, st) }

// stampOf takes a file's identity and times from its stat.
func stampOf(fi os.FileInfo) stamp {
	st := stamp{size: fi.Size(), mode: fi.Mode(), mtime: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.dev, st.ino = uint64(sys.Dev), sys.Ino
		st.ctime = sys.Ctim.Nano()
	}
	return st
}
