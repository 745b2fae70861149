#!/usr/bin/env bash
# Runs tests many times while CPU burners load the machine, to find the
# flakes a loaded CI machine finds: timing assumptions, sleeps used as
# synchronization, races between a test and the goroutines it starts.
#
#   scripts/flake.sh [-n COUNT] [-k BURNERS] [-r REGEXP] [PACKAGE...]
#
#   -n COUNT    go test -count (default 20)
#   -k BURNERS  busy loops running meanwhile (default 2; 0 for none)
#   -r REGEXP   go test -run (default: every test)
#   PACKAGE     packages to test (default ./...)
#
# It runs go test -race once over the packages, kills the burners however
# it ends (trap), and exits non-zero if any test failed. Fix a flake at its
# cause: never by widening a timeout.
set -euo pipefail
cd "$(dirname "$0")/.."

count=20
burners=2
run=""
while getopts "n:k:r:h" opt; do
	case "$opt" in
	n) count=$OPTARG ;;
	k) burners=$OPTARG ;;
	r) run=$OPTARG ;;
	*)
		sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))
if [ $# -eq 0 ]; then
	set -- ./...
fi

pids=()
stop_burners() {
	if [ ${#pids[@]} -gt 0 ]; then
		kill "${pids[@]}" 2>/dev/null || true
		wait "${pids[@]}" 2>/dev/null || true
	fi
	pids=()
}
trap stop_burners EXIT
trap 'stop_burners; exit 130' INT TERM

args=(-race -count="$count")
if [ -n "$run" ]; then
	args+=(-run "$run")
fi

for ((i = 0; i < burners; i++)); do
	(while :; do :; done) &
	pids+=($!)
done
echo "== go test ${args[*]} $* with $burners CPU burner(s) on $(nproc) CPU(s)"
status=0
go test "${args[@]}" "$@" || status=$?
stop_burners
if [ "$status" -ne 0 ]; then
	echo "== FAILED (go test exit status $status)"
else
	echo "== passed $count times"
fi
exit "$status"
