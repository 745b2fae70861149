#!/usr/bin/env bash
# Runs every fuzz target of the module and of the nested modules in
# MODULES, one after the other, for a while each. Targets are found with
# `go test -list '^Fuzz'` in every package, so new ones are picked up
# without editing this script.
#
#   scripts/fuzz.sh          # 30s per target
#   scripts/fuzz.sh 5m       # any -fuzztime: a duration, or a count like 100000x
#
# A failing target leaves its crasher in <package>/testdata/fuzz/<Target>/;
# commit that file with the fix, so the crash stays a regression test. The
# script goes on with the other targets and fails at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME="${1:-30s}"

# The root module and etcd/ (the fleet's decoder of etcd values).
MODULES=(. etcd k8s)

failed=()
ran=0
for mod in "${MODULES[@]}"; do
	for pkg in $(cd "$mod" && go list ./...); do
		# -list prints the matching names, then "ok <pkg> <time>".
		targets=$(cd "$mod" && go test -list '^Fuzz' "$pkg" | grep -E '^Fuzz' || true)
		for target in $targets; do
			ran=$((ran + 1))
			echo "== $pkg $target (-fuzztime $FUZZTIME)"
			# A short -fuzzminimizetime: minimizing a crasher for long looks
			# like a hang, and the unminimized input reproduces it as well.
			if ! (cd "$mod" && go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" \
				-fuzzminimizetime=200x "$pkg"); then
				failed+=("$pkg $target")
			fi
		done
	done
done

echo "== $ran fuzz target(s) run, ${#failed[@]} failed"
if [ "${#failed[@]}" -gt 0 ]; then
	printf '   %s\n' "${failed[@]}"
	echo "crashers are in the packages' testdata/fuzz/ directories:"
	git status --short --untracked-files=all -- '*/testdata/fuzz/*' || true
	exit 1
fi
