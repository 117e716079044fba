#!/usr/bin/env bash
# Builds bin/golangci-lint-statevet (or $1): golangci-lint v2 with the statevet analyzers compiled
# in as module plugins, from tools/golangci-lint, a module of its own, with the Go module proxy
# alone. Says what it builds, how long a cold build takes, and, while the build runs, how long it
# has been running; then how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bin/golangci-lint-statevet}
ver=$(sed -n 's|^[[:space:]]*github.com/golangci/golangci-lint/v2 \(v[^ ]*\).*|\1|p' tools/golangci-lint/go.mod)
echo "golangci-lint: building $out: golangci-lint $ver with the statevet analyzers compiled in (tools/golangci-lint)"
echo "golangci-lint: a cold build (empty module and build caches) downloads golangci-lint's ~200 modules and compiles them:"
echo "golangci-lint: about 5 minutes on 2 cores; with warm caches it takes seconds"
mkdir -p "$(dirname "$out")"
start=$SECONDS
(cd tools/golangci-lint && GOWORK=off go build -o "$OLDPWD/$out" .) &
pid=$!
next=30
while kill -0 "$pid" 2>/dev/null; do
  sleep 1
  if [ $((SECONDS - start)) -ge "$next" ]; then
    echo "golangci-lint: still building ($((next / 60))m$((next % 60))s)"
    next=$((next + 30))
  fi
done
if ! wait "$pid"; then
  echo "golangci-lint: the build failed after $((SECONDS - start))s" >&2
  exit 1
fi
echo "golangci-lint: built $out in $(((SECONDS - start) / 60))m$(((SECONDS - start) % 60))s"
(cd tools/golangci-lint && GOWORK=off go vet .)
