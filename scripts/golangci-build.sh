#!/usr/bin/env bash
# Builds bin/golangci-lint-statevet (or $1): golangci-lint v2 with the statevet analyzers compiled
# in as module plugins, from tools/golangci-lint, a module of its own, with the Go module proxy
# alone, then vets that module. Says what it builds, how long a cold build takes, and, while the
# build and the vet step run, how long each has been running; then how long each took.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bin/golangci-lint-statevet}
ver=$(sed -n 's|^[[:space:]]*github.com/golangci/golangci-lint/v2 \(v[^ ]*\).*|\1|p' tools/golangci-lint/go.mod)
echo "golangci-lint: building $out: golangci-lint $ver with the statevet analyzers compiled in (tools/golangci-lint)"
echo "golangci-lint: a cold build (empty module and build caches) downloads golangci-lint's ~200 modules and compiles them:"
echo "golangci-lint: 3 minutes on 2 cores, up to 8 when they are busy, then about a minute of go vet; with warm caches, seconds"
mkdir -p "$(dirname "$out")"

# timed WHAT CMD...: runs CMD in tools/golangci-lint, saying every 30 seconds how long it has
# been running, then how long it took; fails as CMD does.
timed() {
  local what=$1 start=$SECONDS next=30 pid
  shift
  (cd tools/golangci-lint && GOWORK=off "$@") &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ $((SECONDS - start)) -ge "$next" ]; then
      echo "golangci-lint: still $what ($((next / 60))m$((next % 60))s)"
      next=$((next + 30))
    fi
  done
  if ! wait "$pid"; then
    echo "golangci-lint: $what failed after $((SECONDS - start))s" >&2
    return 1
  fi
  echo "golangci-lint: done $what in $(((SECONDS - start) / 60))m$(((SECONDS - start) % 60))s"
}

case $out in /*) abs=$out ;; *) abs=$PWD/$out ;; esac
timed "building $out" go build -o "$abs" .
echo "golangci-lint: go vet of tools/golangci-lint (its main.go; about a minute cold)"
timed "vetting tools/golangci-lint" go vet .
