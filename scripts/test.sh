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

echo "== go test -race"
go test -race -count=1 -timeout 15m ./...
