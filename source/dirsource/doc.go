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
//   - A file that fails to decode (a truncated write, a syntax error)
//     keeps the objects it had; health names the file, the line and the
//     error. The next write of the file, or the periodic resync, retries
//     it. Nothing is deleted because a file failed to parse.
//   - A removed file deletes its objects.
//   - An inotify queue overflow or a watch error relists the directory; a
//     relist of unchanged files writes nothing. A periodic resync (default
//     DefaultResync) catches anything inotify cannot see.
//   - Running out of inotify instances or watches, and filesystems whose
//     changes inotify does not see (NFS, CIFS, FUSE, 9p), give a clear
//     error when the source is created.
package dirsource
