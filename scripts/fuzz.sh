#!/usr/bin/env bash
# A short run of every fuzz target in the module, then the state store's model-based test run
# long (GPUSTATE_MODEL_STEPS steps per seed).
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-30s}
for pkg in $(go list ./...); do
  for f in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "== $pkg $f ($time)"
    go test -run='^$' -fuzz="^$f\$" -fuzztime="$time" "$pkg"
  done
done
if [ -d runtime/state ]; then
  echo "== runtime/state model test, long"
  GPUSTATE_MODEL_STEPS=${GPUSTATE_MODEL_STEPS:-200000} go test -count=1 -run 'Model' ./runtime/state
fi
