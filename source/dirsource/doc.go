// Package dirsource feeds a statedb table from a directory of manifests:
// YAML or JSON files, each holding one or more objects, decoded by a
// function the user supplies. It is a source.ListerWatcher on inotify
// (fsnotify) plus the glue that registers it as a source.
//
// What it handles, and how:
//
//   - It watches the directory, not the files: an editor's
//     write-to-temp-then-rename lands as one change of the target name.
//   - Kubernetes ConfigMap and Secret mounts swap a "..data" symlink
//     atomically and fire no event for the *.yaml names; any event on a
//     ".." name rescans the directory and emits the files whose content
//     changed.
//   - Events are debounced per directory (Config.Debounce after the last
//     event, at most four times that after the first), so a file being
//     written is read once it is quiet.
//   - A file that fails to decode (a truncated write, a syntax error, an
//     unknown field) keeps the objects it had; health names the file, the
//     line and the error. The next write of the file, or the periodic
//     resync, retries it. Nothing is deleted because a file failed to
//     parse. A file that fails at the first list (after a restart: the
//     process has no memory of its objects) keeps the table uninitialized,
//     so the reconciler does not prune what it yielded before; see
//     source.Config.InitTimeout.
//   - A file of whitespace is taken as being written (ErrEmptyFile) and
//     keeps its objects; a file of only comments yields no objects, so
//     its objects are deleted, as are a removed file's.
//   - One bad entry fails alone: a name that is not a regular file (a
//     directory, a FIFO, a socket, a device; ErrNotRegular), cannot be
//     read (permissions, a symlink loop; ErrUnreadable) or is over
//     Config.MaxFileSize (ErrTooLarge) is reported on its name while
//     every other file is applied. A non-regular file is never opened,
//     and reads never block, so nothing holds up Stop or a resync.
//   - A name that is a symbolic link resolving outside the directory is
//     refused (ErrOutsideDir) and never opened, unless
//     Config.AllowSymlinksOutside: whoever writes the directory must not
//     have an agent running as root read files they cannot. Links that
//     stay inside, as a ConfigMap mount's "..data" ones do, are followed;
//     the opened file is checked to be the one the name leads to, so a
//     link swapped meanwhile is not read.
//   - Errors quote no more than a short prefix of a manifest's keys and
//     values (DecodeYAML's, and the source's for every item; see
//     source.Quote): health may be served to anyone who can connect.
//     DecodeYAML takes time linear in the file: it refuses repeated keys
//     and documents over MaxKeys, MaxNodes, MaxExpandedBytes or
//     MaxKeyWork (ErrTooComplex) before decoding them into a type. A
//     decode in progress is abandoned at Stop.
//   - Two files that define the same object are both reported
//     (source.ErrDuplicate); the file first by name wins, at every resync
//     and after a restart.
//   - An inotify queue overflow or a watch error relists the directory; a
//     relist of unchanged files writes nothing. A periodic resync (default
//     DefaultResync) catches anything inotify cannot see; it reads only
//     the files whose size, times or inode changed since they were last
//     read.
//   - Running out of inotify instances or watches, and filesystems whose
//     changes inotify does not see (NFS, CIFS, FUSE, 9p), give a clear
//     error when the source is created.
package dirsource
