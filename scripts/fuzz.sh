#!/usr/bin/env bash
# A short run of every fuzz target in the module, then the state store's model-based tests run
# long: $2 (default 200000) steps per seed of TestModel, passed as the tests' -model.steps flag
# (TestModelAt takes a fifth as many, TestShareModel a tenth, TestInteractionModel, the interaction
# model of the public API, a hundredth, under the race detector where cgo works).
# Both model tests cost the same per step however long they run, so the long run takes a time
# proportional to the steps (about three minutes for 200000 on one core); the timeout is a guard.
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
  steps=${2:-200000}
  echo "== runtime/state model tests, long ($steps steps)"
  go test -count=1 -timeout=30m -run '^TestModel(At)?$' ./runtime/state/internal/store -args -model.steps=$steps
  # The sharing model's cache grows over a run, and each step checks it whole: a tenth as many.
  go test -count=1 -timeout=30m -run '^TestShareModel$' ./runtime/state/internal/store -args -model.steps=$((steps / 10))
  # The replay model (Step, At and Rollback by replay): a tenth as many, each step runs a step function.
  go test -count=1 -timeout=30m -run '^TestReplayModel$' ./runtime/state/internal/store -args -model.steps=$((steps / 10))
  go test -count=1 -timeout=30m -run '^TestGroup(Prefix)?Model$' ./runtime/state/internal/store -args -model.steps=$steps
  # The interaction model compares every handle and every block table at each step and
  # runs its kernels on stream goroutines: a hundredth as many steps, under the race detector.
  race=
  if [ "$(go env CGO_ENABLED)" = 1 ] && command -v gcc >/dev/null; then race=-race; fi
  go test $race -count=1 -timeout=30m -run '^TestInteractionModel$' ./runtime/state/internal/store -args -model.steps=$((steps / 100))
fi
