#!/usr/bin/env bash
# The statevet demo: statevet must say nothing about examples/contracts/valid
# and report exactly the findings listed in examples/contracts/faulty/expected.txt
# (the faulty package builds only with -tags statevet_demo). Exits 0 only when
# both hold.
set -euo pipefail
cd "$(dirname "$0")/.."

statevet=${STATEVET:-bin/statevet}
if [ ! -x "$statevet" ]; then
  mkdir -p bin
  go build -o bin/statevet ./cmd/statevet
  statevet=bin/statevet
fi
fail=0

echo "== statevet ./examples/contracts/valid (expecting silence)"
if out=$("$statevet" ./examples/contracts/valid 2>&1); then
  echo "   no findings"
else
  echo "$out"
  echo "FAIL: statevet reported findings on the valid package"
  fail=1
fi

echo
echo "== statevet -tags statevet_demo ./examples/contracts/faulty (expecting the findings in expected.txt)"
set +e
out=$(GOFLAGS="${GOFLAGS:+$GOFLAGS }-tags=statevet_demo" "$statevet" ./examples/contracts/faulty 2>&1)
rc=$?
set -e
# Keep file:line:col: message, with the file relative to the package.
got=$(printf '%s\n' "$out" | sed -n 's#^.*/examples/contracts/faulty/##p')
printf '%s\n' "$got" | sed 's/^/   /'
if [ "$rc" -eq 0 ]; then
  echo "FAIL: statevet reported nothing on the faulty package"
  fail=1
fi
want=0
while IFS= read -r line; do
  case "$line" in ''|'#'*) continue ;; esac
  want=$((want + 1))
  loc=${line%%: *}   # faulty.go:18
  msg=${line#*: }    # the message substring
  if ! printf '%s\n' "$got" | grep -F "$loc:" | grep -qF -- "$msg"; then
    echo "FAIL: missing finding $loc: $msg"
    fail=1
  fi
done < examples/contracts/faulty/expected.txt
n=$(printf '%s\n' "$got" | grep -c . || true)
if [ "$n" -ne "$want" ]; then
  echo "FAIL: statevet reported $n findings on the faulty package, expected.txt lists $want"
  fail=1
fi

echo
if [ "$fail" -ne 0 ]; then
  echo "demo: FAILED"
  exit 1
fi
echo "demo: ok (valid package clean, $want expected findings on the faulty package)"
