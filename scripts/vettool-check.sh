#!/usr/bin/env bash
# go vet with statevet as its vet tool, the way the docs give it: -vettool="$(go tool -n statevet)"
# in a module with the tool directive, here bin/statevet. The path must be an executable (an empty
# one, -vettool=, makes go vet run without statevet and pass silently), and go vet must fail with
# every finding of examples/kvcache/misuse/expected.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bin/statevet ] || go build -o bin/statevet ./cmd/statevet
vettool=$PWD/bin/statevet
echo "== go vet -tags statevet_demo -vettool=\"$vettool\" ./examples/kvcache/misuse (expecting findings)"
[ -n "$vettool" ] && [ -x "$vettool" ] || { echo "FAIL: no vet tool at '$vettool'"; exit 1; }
set +e
out=$(go vet -tags statevet_demo -vettool="$vettool" ./examples/kvcache/misuse 2>&1)
rc=$?
set -e
printf '%s\n' "$out" | sed 's/^/   /'
fail=0
[ "$rc" -ne 0 ] || { echo "FAIL: go vet passed"; fail=1; }
while IFS= read -r line; do
  case "$line" in '' | '#'*) continue ;; esac
  loc=${line%%: *}
  msg=${line#*: }
  printf '%s\n' "$out" | grep -F "misuse/$loc:" | grep -qF -- "$msg" || { echo "FAIL: missing $loc: $msg"; fail=1; }
done <examples/kvcache/misuse/expected.txt
[ "$fail" -eq 0 ] || exit 1
echo "   go vet reported every finding through statevet"
