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

# --- examples/kvcache: the program a user writes, from go generate to a run ---

echo
echo "== go generate ./examples/kvcache/... (the committed handles and contract report must come out byte for byte)"
handles() { find examples/kvcache \( -name '*_state.go' -o -name CONTRACTS.md \) -exec cksum {} + | sort; }
before=$(handles)
go generate ./examples/kvcache/...
if [ "$(handles)" != "$before" ]; then
  echo "FAIL: go generate changed the committed handles:"
  diff <(echo "$before") <(handles) || true
  fail=1
elif ! go run ./cmd/stategen -check ./examples/kvcache/...; then
  echo "FAIL: stategen -check found stale handles"
  fail=1
else
  echo "   examples/kvcache/cache: kvcache_state.go and CONTRACTS.md are up to date"
fi

echo
echo "== stategen -tags statevet_demo ./examples/kvcache/misuse (expecting a refusal: a contract with no bound)"
set +e
out=$(GOFLAGS="${GOFLAGS:+$GOFLAGS }-tags=statevet_demo" go run ./cmd/stategen ./examples/kvcache/misuse 2>&1)
rc=$?
set -e
printf '%s\n' "$out" | sed 's/^/   /'
if [ "$rc" -ne 1 ] || ! printf '%s\n' "$out" | grep -q 'misuse.go:33:.*has no bound'; then
  echo "FAIL: stategen did not refuse the misuse contract (exit $rc)"
  fail=1
fi

echo
echo "== statevet ./examples/kvcache/... (expecting silence on the program and its generated handles)"
if out=$("$statevet" ./examples/kvcache/... 2>&1); then
  echo "   no findings"
else
  echo "$out"
  echo "FAIL: statevet reported findings on examples/kvcache"
  fail=1
fi

echo
echo "== statevet -tags statevet_demo ./examples/kvcache/misuse (expecting the findings in expected.txt)"
set +e
out=$(GOFLAGS="${GOFLAGS:+$GOFLAGS }-tags=statevet_demo" "$statevet" ./examples/kvcache/misuse 2>&1)
rc=$?
set -e
got=$(printf '%s\n' "$out" | sed -n 's#^.*/examples/kvcache/misuse/##p')
printf '%s\n' "$got" | sed 's/^/   /'
if [ "$rc" -eq 0 ]; then
  echo "FAIL: statevet reported nothing on the misuse package"
  fail=1
fi
misuse_want=0
while IFS= read -r line; do
  case "$line" in ''|'#'*) continue ;; esac
  misuse_want=$((misuse_want + 1))
  loc=${line%%: *}
  msg=${line#*: }
  if ! printf '%s\n' "$got" | grep -F "$loc:" | grep -qF -- "$msg"; then
    echo "FAIL: missing finding $loc: $msg"
    fail=1
  fi
done < examples/kvcache/misuse/expected.txt
n=$(printf '%s\n' "$got" | grep -c . || true)
if [ "$n" -ne "$misuse_want" ]; then
  echo "FAIL: statevet reported $n findings on the misuse package, expected.txt lists $misuse_want"
  fail=1
fi

echo
echo "== go run ./examples/kvcache (backend: ${GPUSTATE_BACKEND:-chosen by device.Open})"
if ! go run ./examples/kvcache; then
  echo "FAIL: the kvcache example failed"
  fail=1
fi

# --- examples/gridsim: sparse checkpoints, At, Plan and rollback of a simulation ---

echo
echo "== go generate ./examples/gridsim/... (the committed handles and contract report must come out byte for byte)"
grid_handles() { find examples/gridsim \( -name '*_state.go' -o -name CONTRACTS.md \) -exec cksum {} + | sort; }
before=$(grid_handles)
go generate ./examples/gridsim/...
if [ "$(grid_handles)" != "$before" ]; then
  echo "FAIL: go generate changed the committed gridsim handles:"
  diff <(echo "$before") <(grid_handles) || true
  fail=1
elif ! go run ./cmd/stategen -check ./examples/gridsim/...; then
  echo "FAIL: stategen -check found stale gridsim handles"
  fail=1
else
  echo "   examples/gridsim/field: field_state.go and CONTRACTS.md are up to date"
fi

echo
echo "== statevet ./examples/gridsim/... (expecting silence on the program and its generated handles)"
if out=$("$statevet" ./examples/gridsim/... 2>&1); then
  echo "   no findings"
else
  echo "$out"
  echo "FAIL: statevet reported findings on examples/gridsim"
  fail=1
fi

echo
echo "== go run ./examples/gridsim (backend: ${GPUSTATE_BACKEND:-chosen by device.Open})"
if ! go run ./examples/gridsim; then
  echo "FAIL: the gridsim example failed"
  fail=1
fi

echo
if [ "$fail" -ne 0 ]; then
  echo "demo: FAILED"
  exit 1
fi
echo "demo: ok (valid package clean, $want expected findings on the faulty package; kvcache generated, vetted ($misuse_want expected findings on its misuse) and run)"
