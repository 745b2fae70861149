// Command example is a small converge agent that keeps a directory on disk
// in sync with a table of desired files. Read it, run it, copy it.
//
// Run it from the repository root, and in another terminal:
//
//	$ curl -X PUT localhost:8080/files/hello.txt -d '{"content": "hello\n"}'
//	                                     # answers at once, status Pending:
//	                                     # the reconciler writes it right after
//	$ curl localhost:8080/files/hello.txt  # Done: now it is on disk
//	$ ls -l example-state/
//	-rw-r--r-- 1 you you 6 Nov 22 06:20 hello.txt
//	$ curl localhost:8080/files          # each file with its status: Done
//	$ echo tampered > example-state/hello.txt; touch example-state/stray
//	$ sleep 11; cat example-state/hello.txt; ls example-state/
//	hello
//	hello.txt
//	$ curl localhost:8080/status         # what the reconciler is doing
//	$ go run ./example shell reconciler/status
//
// # What it shows
//
// A converge application has three parts: a statedb table of desired
// objects, each carrying a reconciler.Status; the reconciler.Operations
// that make the outside world match the table; and the code that writes
// the table. The reconciler does the rest: it calls Update for each new or
// changed row and Delete for each deleted one, retries failures with
// backoff, records each row's status, prunes and repairs drift at every
// full reconciliation, and reports health and metrics. Here:
//
//   - files.go: the object (File: name, content, mode, status), its table,
//     the name index and converge's status index.
//   - ops.go: the Operations. Update writes a file atomically unless it
//     already matches, so it also repairs drift; Delete removes a file;
//     Prune removes files that nobody asked for.
//   - reconcile.go: the reconciler.Config, and how full reconciliation and
//     refresh together repair changes made behind the program's back.
//   - desired.go: the API's writer of the table. PUT and DELETE save or
//     remove one file (specdir.go: one JSON file per desired file, in the
//     directory the desired-state file names), then change the table;
//     the table's write lock is held for the change alone. The API's
//     files are capped (--max-files, --max-total-bytes: 403 past them).
//     At start they are loaded under a table initializer, so that nothing
//     is pruned before the desired set is known. statedir.go ties the
//     desired-state file to its state directory (see Safety).
//   - manifests.go: a second writer, with --desired-dir: a directory of
//     YAML or JSON manifests of files, fed into the same table by a
//     source/dirsource source. Each writer owns its rows (File.Origin),
//     so neither deletes nor overwrites the other's, and the table is
//     initialized only when both have loaded.
//   - api.go: the HTTP API: list, get, PUT and DELETE desired files.
//   - server.go: the HTTP server: the API and the operator endpoints
//     from internal/agentkit (shared with example/routes): /status (the
//     reconcilers' status snapshots, from reconciler.Cell's registry),
//     /healthz (503 with the reason when the reconciler is degraded, from
//     agentkit's cell.Health, which remembers every job's report), /metrics
//     (Prometheus, from converge's metrics.Cell) and /debug/vars (expvar).
//   - dirs.go: directory objects (from manifests: kind: dir), whose files
//     (dir: <name>) depend on them through Config.DependsOn
//     (reconcile.go, files.go's dependsOn): a directory is created before
//     its files are written and removed after they are, and a file whose
//     directory object is missing is Blocked, as Explain says.
//   - atomic.go: writing a file so that a crash never leaves half of it.
//   - config.go and main.go: the flags (--help lists them), the hive and
//     the command line.
//
// # The shell
//
// A running agent serves hive's shell on a unix socket, as Cilium agents
// do, for its own user only: /run/example/shell.sock as root,
// $XDG_RUNTIME_DIR/example/shell.sock otherwise (--shell-sock-path),
// mode 0600 in a directory no one else may write. "go run ./example
// shell", run by that user, opens it; a command can also be given
// directly: reconciler/status, reconciler/full (prune and refresh now),
// reconciler/wait, reconciler/metrics, health, or "db/show
// desired-files". Nothing in it runs programs or reads files outside its
// private working directory unless the agent runs with
// --shell-unrestricted (which adds exec and cat).
//
// # Safety
//
// Pruning deletes files, so the example guards it. Desired names are
// single path elements that start with a letter or digit: no "..", no
// "/", and no clash with the ".tmp-" files of atomic writes (a leftover
// from a crash is pruned). Prune removes only regular files and symlinks,
// never directories. The desired-state file must live outside the state
// directory, and it records the absolute path of the state directory it
// is for (statedir.go): pruning deletes whatever the file does not list,
// so a desired-state file left in the working directory must not be
// applied to the directory a mistyped --state-dir names. The agent refuses
// to start, naming both directories, when the file is for another
// directory (the same one through a symbolic link is fine), when it does
// not say which directory it is for, or when there is no desired-state
// file but the state directory already holds files.
package main
