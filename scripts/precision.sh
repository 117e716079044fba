#!/usr/bin/env bash
# Precision run of the statevet dataflow analyzers: a vet check with false
# positives gets turned off, so statevet must report nothing, and fail
# nowhere, on code that uses it correctly or not at all.
#
#  1. go vet -vettool=bin/statevet over golang.org/x/tools v0.52.0 ./... (from
#     the module cache, copied to a temporary directory) and over std: no
#     package there declares directives, so this checks the fast path and
#     the writes inference, which runs in every package.
#  2. The engine itself on real code: the precision tests of
#     analyzers/stcleanup with os.Open, os.Create, os.OpenFile and
#     os.CreateTemp declared acquirers and (*os.File).Close their release,
#     over std and golang.org/x/tools (go, internal, cmd, refactor: the
#     packages whose dependencies go.sum covers) (PRECISION_FILES=0 skips it;
#     PRECISION_FILES_PKGS chooses the patterns). Every finding fails the
#     run unless it is listed, checked by hand, in knownLeaks.
#
# CI runs a subset of both through go test ./analyzers/stcleanup.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

go build -o bin/statevet ./cmd/statevet
statevet=$repo/bin/statevet

src=$(go env GOMODCACHE)/golang.org/x/tools@v0.52.0
if [ ! -d "$src" ]; then
  go mod download golang.org/x/tools
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/precision.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cp -r "$src" "$work/tools"
chmod -R u+w "$work/tools"

failed=0
# check NAME: fails the run when NAME's output holds anything.
check() {
  local name=$1 rc=$2
  if [ "$rc" -ne 0 ] || [ -s "$work/$name.out" ]; then
    echo "FAIL $name (exit $rc):"
    head -50 "$work/$name.out"
    failed=1
  else
    echo "ok   $name: no findings"
  fi
}

echo "== go vet -vettool=statevet golang.org/x/tools/... ($(cd "$work/tools" && GOFLAGS=-mod=mod GOPROXY=off go list ./... 2>/dev/null | wc -l) packages)"
rc=0
(cd "$work/tools" && GOFLAGS=-mod=mod GOPROXY=off GOWORK=off GOTOOLCHAIN=local \
  go vet -vettool="$statevet" ./...) >"$work/tools.out" 2>&1 || rc=$?
check tools $rc

echo "== go vet -vettool=statevet std ($(cd "$work" && go list std | wc -l) packages)"
rc=0
(cd "$work" && env -u GOFLAGS GOWORK=off GOTOOLCHAIN=local go vet -vettool="$statevet" std) >"$work/std.out" 2>&1 || rc=$?
check std $rc

if [ "${PRECISION_FILES:-1}" != 0 ]; then
  pkgs=${PRECISION_FILES_PKGS:-std,golang.org/x/tools/go/...,golang.org/x/tools/internal/...,golang.org/x/tools/cmd/...,golang.org/x/tools/refactor/...}
  echo "== the engine with os files as resources over $pkgs"
  rc=0
  STATEVET_PRECISION_PKGS=$pkgs go test -count=1 -timeout=60m -run '^TestPrecision' -v ./analyzers/stcleanup \
    >"$work/files.out" 2>&1 || rc=$?
  grep -E '^(=== RUN|--- |\s+precision_test)' "$work/files.out" | head -100 || true
  if [ "$rc" -ne 0 ]; then
    tail -20 "$work/files.out"
    failed=1
  fi
fi

exit $failed
