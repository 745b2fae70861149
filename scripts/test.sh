#!/usr/bin/env bash
# The one command for converge's checks; CI runs it on a clean clone.
# It installs what it needs (staticcheck, from the Go module proxy), then
# checks formatting, vet, staticcheck, and runs every test with -race.
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK_VERSION=v0.8.2
GOBIN_DIR="$(go env GOPATH)/bin"
export PATH="$GOBIN_DIR:$PATH"

echo "== gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "not gofmt-formatted:"
	echo "$unformatted"
	exit 1
fi

echo "== go vet"
go vet ./...

echo "== staticcheck"
if ! staticcheck -version 2>/dev/null | grep -q "${STATICCHECK_VERSION#v}"; then
	GOFLAGS= go install "honnef.co/go/tools/cmd/staticcheck@${STATICCHECK_VERSION}"
fi
staticcheck ./...

# --- apt lock: wait for another apt instead of failing ----------------------
# (owned by the sources work, issue 33 item 7; keep this block self-contained)
# With another process holding apt's or dpkg's lock (unattended-upgrades, a
# parallel job), apt-get failed and, under set -e, the script ran no test at
# all. apt-get is wrapped (a function shadows the command, in subshells
# too): a run that fails on a held lock is tried again every 2 s, for at
# most APT_LOCK_WAIT seconds (default 300), then fails as before.
# DPkg::Lock::Timeout alone covers dpkg's lock, not apt-get update's lists
# lock, hence the retry.
APT_LOCK_WAIT=${APT_LOCK_WAIT:-300}
apt-get() {
	local deadline=$((SECONDS + APT_LOCK_WAIT)) err rc
	err=$(mktemp)
	while :; do
		rc=0
		command apt-get -o DPkg::Lock::Timeout=10 "$@" 2>"$err" || rc=$?
		if [ "$rc" -eq 0 ] || [ "$SECONDS" -ge "$deadline" ] ||
			! grep -qE 'Could not get lock|Unable to lock|Unable to acquire the dpkg frontend lock' "$err"; then
			cat "$err" >&2
			rm -f "$err"
			return "$rc"
		fi
		echo "apt-get: another process holds apt's lock; waiting (at most ${APT_LOCK_WAIT}s)" >&2
		sleep 2
	done
}
# --- end apt lock -------------------------------------------------------------

# --- promtool: metrics/alerts.yaml and its unit tests ----------------------
# (owned by metrics/; keep this block self-contained)
# promtool comes from Debian's prometheus package, unpacked into a cache
# directory rather than installed: no server, no service unit, no system
# user. That takes about 4s on a fresh machine, apt-get update included;
# `go install github.com/prometheus/prometheus/cmd/promtool` downloads
# ~1.8GB of modules for over a minute and then fails on this proxy. It runs
# before the Go tests so that metrics' TestDashboardQueriesParse finds it.
echo "== promtool"
PROMTOOL_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/converge/promtool"
export PATH="$PROMTOOL_DIR:$PATH"
if ! command -v promtool >/dev/null 2>&1; then
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "promtool not found: install Prometheus' promtool (e.g. brew install prometheus)"
		exit 1
	fi
	(
		tmp=$(mktemp -d)
		trap 'rm -rf "$tmp"' EXIT
		cd "$tmp"
		apt_get() { apt-get -qq -o APT::Sandbox::User=root "$@"; }
		if ! apt_get download prometheus 2>/dev/null; then
			apt_get update
			apt_get download prometheus
		fi
		dpkg-deb -x prometheus_*.deb unpacked
		mkdir -p "$PROMTOOL_DIR"
		cp unpacked/usr/bin/promtool "$PROMTOOL_DIR/"
	)
fi
promtool --version 2>&1 | sed -n 1p
promtool check rules metrics/alerts.yaml
promtool test rules metrics/testdata/alerts_test.yaml
# --- end promtool -------------------------------------------------------------

# --- nftables: example/firewall's end-to-end test ---------------------------
# (owned by example/firewall; keep this block self-contained)
# The test loads rulesets with nft into a network namespace of its own, so
# it needs nft (and root). Debian's nftables package only installs nft and
# its libraries here: its service is not enabled, and nothing touches the
# host's ruleset. Without nft the test skips, but with CI=true it fails.
echo "== nft"
if ! command -v nft >/dev/null 2>&1 && [ ! -x /usr/sbin/nft ] && [ ! -x /sbin/nft ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		apt_install_nft() {
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
				-o APT::Sandbox::User=root nftables >/dev/null
		}
		if ! apt_install_nft 2>/dev/null; then
			apt-get -qq -o APT::Sandbox::User=root update
			apt_install_nft
		fi
	else
		echo "nft not found: install nftables as root (apt-get install nftables) for example/firewall's end-to-end test"
	fi
fi
PATH="$PATH:/usr/sbin:/sbin" nft --version 2>/dev/null || true
# --- end nftables -------------------------------------------------------------

# --- docs: links, and curl for the README's session ---------------------------
# (owned by the docs work; keep this block self-contained)
# internal/doccheck checks every relative link and anchor of the repository's
# Markdown pages, and the .md paths Go comments name: a second, here, so that
# a broken link fails before the long tests. Its README tests (the quick start
# run in a new module, the example's session run line by line) run with the
# other tests below; the session needs curl, installed here when missing (as
# root, with apt-get). Without curl that test skips, but with CI=true it fails.
echo "== docs"
if ! command -v curl >/dev/null 2>&1; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		apt_install_curl() {
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
				-o APT::Sandbox::User=root curl >/dev/null
		}
		if ! apt_install_curl 2>/dev/null; then
			apt-get -qq -o APT::Sandbox::User=root update
			apt_install_curl
		fi
	else
		echo "curl not found: install it (apt-get install curl) for internal/doccheck's README session test"
	fi
fi
go test -count=1 -run 'TestLinks|TestGoCommentLinks|TestGuideIndexListsEveryPage|TestGuaranteesNameRealTests|TestDocSnippets' ./internal/doccheck
# --- end docs -----------------------------------------------------------------

# --- nested modules: etcd/ ----------------------------------------------------
# (owned by the sources and replicas work; keep this block self-contained)
# etcd/ is a module of its own (github.com/converge-go/converge/etcd), so
# that the etcd client and server, gRPC and OpenTelemetry stay out of the
# core go.mod; `go vet ./...` and `go test ./...` above do not enter it.
# Most of its tests run a real etcd: the embedded server of
# go.etcd.io/etcd/server/v3/embed, in-process on 127.0.0.1, so nothing is
# installed. The replicas' multi-process fault tests (etcd/shard/e2e_*_test.go)
# and the fleet example's end-to-end test (etcd/example/fleet) build an etcd
# server and the fleet controller with go build, run them in network
# namespaces of their own (ip, as root) and cut one off with nft (installed
# by the nftables block above); without those they skip, and fail under
# CI=true. The module's tests take about 3.5 minutes on 2 cores, two of them
# the chaos test (CONVERGE_CHAOS=30s or =10m runs it shorter or longer).
for mod in etcd; do
	echo "== $mod: go vet"
	(cd "$mod" && go vet ./...)
	echo "== $mod: staticcheck"
	(cd "$mod" && staticcheck ./...)
	echo "== $mod: go test -race"
	(cd "$mod" && go test -race -count=1 -timeout 10m ./...)
done
# --- end nested modules -------------------------------------------------------

# --- nested module: benchmarks/replicas ---------------------------------------
# (owned by the replicas benchmarks; keep this block self-contained)
# The harness of issue 20's replica rows (failover, handover, scale-out,
# coordination) is a module of its own: it links etcd, which the core
# module and its benchmarks must not. Its smoke test runs every row at tiny
# sizes against an embedded etcd, re-executing itself as replica
# processes, and checks the rows, not the timings: about 30 s on 2 cores.
echo "== benchmarks/replicas: go vet, staticcheck, go test -race"
(cd benchmarks/replicas && go vet ./... && staticcheck ./... && go test -race -count=1 -timeout 5m ./...)
# --- end benchmarks/replicas ---------------------------------------------------

# --- nested module: benchmarks/crqueue ----------------------------------------
# (owned by the benchmarks; keep this block self-contained)
# The waiting-order rows' peer, controller-runtime's priority queue, is
# linked only in this module of its own, so that the core module never
# requires controller-runtime. Its smoke test runs each workload once per
# side at tiny sizes and checks the rows and what the fake target saw, not
# the timings: about 20 s on 2 cores, the first build's modules aside.
echo "== benchmarks/crqueue: go vet, staticcheck, go test -race"
(cd benchmarks/crqueue && go vet ./... && staticcheck ./... && go test -race -count=1 -timeout 5m ./...)
# --- end benchmarks/crqueue ----------------------------------------------------

# --- nested module: k8s/ -----------------------------------------------------
# (owned by the Kubernetes work; keep this block self-contained)
# k8s/ is a module of its own (github.com/converge-go/converge/k8s), so that
# client-go and the API server stay out of the core go.mod. Its tests run a
# real Kubernetes API server in-process (k8s.io/apiextensions-apiserver's
# test server over an embedded etcd, on 127.0.0.1, exported as
# k8s/apiservertest): nothing is installed or downloaded at run time, and
# nothing skips. k8s/crtest is a module of its own too: it checks that
# controller-runtime's client works against that server, and keeps
# controller-runtime out of the k8s module's requirements. The first build
# takes minutes; the tests about four minutes under -race on 2 cores.
echo "== k8s: go vet, staticcheck, go test -race"
(cd k8s && go vet ./... && staticcheck ./... && go test -race -count=1 -timeout 15m ./...)
echo "== k8s/crtest: go vet, staticcheck, go test -race"
(cd k8s/crtest && go vet ./... && staticcheck ./... && go test -race -count=1 -timeout 5m ./...)
# --- end nested module: k8s/ -------------------------------------------------

# --- nested module: otel/ ----------------------------------------------------
# (owned by the observer hook's OpenTelemetry adapter; keep this block
# self-contained)
# otel/ is a module of its own (github.com/converge-go/converge/otel), so
# that the core module's go.mod requires no OpenTelemetry: a user of
# reconciler, index or metrics links none of it. Its tests use the SDK's
# in-memory exporter (no collector, nothing downloaded at run time); with
# otel/example, the traced files agent, about 10 s under -race on 2 cores.
echo "== otel: go vet, staticcheck, go test -race"
(cd otel && go vet ./... && staticcheck ./... && go test -race -count=1 -timeout 5m ./...)
# --- end nested module: otel/ ------------------------------------------------

# --- fuzz: a few seconds per decoder and quoting function ---------------------
# (owned by the hostile-input work, issue 52; keep this block self-contained)
# Each target that takes input from others (a manifest, an API body, an etcd
# value) or cuts what an error quotes runs a number of inputs (FUZZ_SMOKE,
# default 10000, or the line's own for a slow target: about what 3 s of this
# machine runs), so a crash an input of the seed corpus' neighbourhood finds
# fails CI; the long runs are scripts/fuzz.sh's. A count, not a duration:
# with a duration, go1.26's fuzz coordinator can report its own deadline as
# a failure ("context deadline exceeded", no crasher written;
# golang/go#75804, fixed in go1.27), which FuzzSanitize hit once on a busy
# machine. Lines: module directory, package, target, [inputs].
FUZZ_SMOKE=${FUZZ_SMOKE:-10000}
echo "== fuzz smoke (-fuzztime ${FUZZ_SMOKE}x per target, fewer for slow ones)"
while read -r mod pkg target inputs; do
	(cd "$mod" && go test -run '^$' -fuzz "^${target}\$" -fuzztime "${inputs:-$FUZZ_SMOKE}x" -fuzzminimizetime=200x "$pkg" </dev/null)
done <<'FUZZ_TARGETS'
. ./source FuzzQuote
. ./source/dirsource FuzzDecodeYAML
. ./source/dirsource FuzzSafeMessage
. ./example/internal/agentkit FuzzDecodeJSON
. ./example/routes FuzzParseRoute
. ./example/firewall FuzzParseRule
etcd ./example/fleet FuzzDecodeGroup
k8s ./k8ssource FuzzSanitize 2000
k8s ./k8ssource FuzzShortenQuotedLinear 100
FUZZ_TARGETS
# --- end fuzz -------------------------------------------------------------------

echo "== go test -race"
go test -race -count=1 -timeout 15m ./...
