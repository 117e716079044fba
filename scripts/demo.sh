#!/usr/bin/env bash
# The gpustate demo, on the host backend unless GPUSTATE_BACKEND says otherwise:
#   - statevet says nothing on examples/contracts/valid and reports exactly the findings
#     listed in examples/contracts/faulty/expected.txt;
#   - for each example program, go generate reproduces the committed handles, contract
#     report and its charts byte for byte, statevet says nothing on it, and it runs;
#   - stategen refuses examples/kvcache/misuse's contract, and statevet reports exactly the
#     findings in its expected.txt;
#   - the kvcache example serves its pools' metrics (-metrics) and curl finds prefix hits and
#     evictions in them.
# Packages with deliberate mistakes build only with the build tag statevet_demo, so that
# the repository's own checks stay clean: statevet takes it as -tags statevet_demo, and
# stategen, which has no -tags flag, through GOFLAGS. Every step prints the command it
# runs. Exits 0 only when every step went as expected.
set -euo pipefail
cd "$(dirname "$0")/.."

statevet=${STATEVET:-bin/statevet}
if [ ! -x "$statevet" ]; then
  mkdir -p bin
  go build -o bin/statevet ./cmd/statevet
  statevet=bin/statevet
fi
demo_tag=statevet_demo
fail=0
failed() { echo "FAIL: $*"; fail=1; }

# silent PATTERN: statevet must report nothing.
silent() {
  echo
  echo "== $statevet $1 (expecting silence)"
  local out
  if out=$("$statevet" "$1" 2>&1); then
    echo "   no findings"
  else
    printf '%s\n' "$out"
    failed "statevet reported findings on $1"
  fi
}

# expect DIR: statevet, with the demo tag, must report exactly the findings in
# DIR/expected.txt, one a line as FILE:LINE: a fixed substring of the message (related
# information counts as a line of its own). Sets found to their number.
expect() {
  local dir=$1 out rc got line loc msg want=0
  echo
  echo "== $statevet -tags $demo_tag ./$dir (expecting the findings in expected.txt)"
  set +e
  out=$("$statevet" -tags "$demo_tag" "./$dir" 2>&1)
  rc=$?
  set -e
  # Keep file:line:col: message, with the file relative to the package.
  got=$(printf '%s\n' "$out" | sed -n "s#^.*/$dir/##p")
  printf '%s\n' "$got" | sed 's/^/   /'
  [ "$rc" -ne 0 ] || failed "statevet reported nothing on $dir"
  while IFS= read -r line; do
    case "$line" in '' | '#'*) continue ;; esac
    want=$((want + 1))
    loc=${line%%: *} # faulty.go:18
    msg=${line#*: }  # the message substring
    printf '%s\n' "$got" | grep -F "$loc:" | grep -qF -- "$msg" || failed "missing finding $loc: $msg"
  done <"$dir/expected.txt"
  found=$(printf '%s\n' "$got" | grep -c . || true)
  [ "$found" -eq "$want" ] || failed "statevet reported $found findings on $dir, expected.txt lists $want"
}

# generated DIR: go generate must reproduce the committed handles and report, and
# stategen -check must agree.
generated() {
  local dir=$1 before
  echo
  echo "== go generate ./$dir/... (the committed handles, contract report and charts must come out byte for byte)"
  sums() { find "$dir" \( -name '*_state.go' -o -name CONTRACTS.md -o -name 'CONTRACTS-*.svg' \) -exec cksum {} + | sort; }
  before=$(sums)
  go generate "./$dir/..."
  if [ "$(sums)" != "$before" ]; then
    failed "go generate changed the committed files of $dir:"
    diff <(echo "$before") <(sums) || true
  elif echo "   go run ./cmd/stategen -check ./$dir/..." && ! go run ./cmd/stategen -check "./$dir/..."; then
    failed "stategen -check found stale files in $dir"
  else
    echo "   $(sums | awk '{print $3}' | tr '\n' ' ')up to date"
  fi
}

# runs DIR: the example program must exit 0.
runs() {
  echo
  echo "== go run ./$1 (backend: ${GPUSTATE_BACKEND:-chosen by device.Open})"
  go run "./$1" || failed "the $1 example failed"
}

silent ./examples/contracts/valid
expect examples/contracts/faulty
contract_findings=$found

# examples/kvcache: the program a user writes, from go generate to a run.
generated examples/kvcache
echo
stategen_goflags="${GOFLAGS:+$GOFLAGS }-tags=$demo_tag"
echo "== GOFLAGS='$stategen_goflags' go run ./cmd/stategen ./examples/kvcache/misuse (expecting a refusal: a contract with no bound)"
set +e
out=$(GOFLAGS="$stategen_goflags" go run ./cmd/stategen ./examples/kvcache/misuse 2>&1)
rc=$?
set -e
printf '%s\n' "$out" | sed 's/^/   /'
if [ "$rc" -ne 1 ] || ! printf '%s\n' "$out" | grep -q 'misuse.go:33:.*has no bound'; then
  failed "stategen did not refuse the misuse contract (exit $rc)"
fi
silent ./examples/kvcache/...
expect examples/kvcache/misuse
misuse_findings=$found
runs examples/kvcache

# kvcache's pools as Prometheus metrics: the example serves them on a loopback port with
# -metrics, and curl scrapes them.
metrics() {
  echo
  echo "== bin/kvcache -metrics 127.0.0.1:0, then curl its /metrics (loopback only)"
  local log url pid i
  log=$(mktemp)
  go build -o bin/kvcache ./examples/kvcache
  bin/kvcache -metrics 127.0.0.1:0 >"$log" 2>&1 &
  pid=$!
  for i in $(seq 300); do
    url=$(sed -n 's/^metrics: serving \(http:[^ ]*\) until interrupted$/\1/p' "$log")
    [ -n "$url" ] || ! kill -0 "$pid" 2>/dev/null || { sleep 0.2; continue; }
    break
  done
  if [ -z "$url" ]; then
    cat "$log"
    failed "the kvcache example did not serve its metrics"
  elif out=$(curl -fsS "$url" | grep -E '^gpustate_pool_(prefix_hits_total|prefix_adopted_rows_total|evictions_total|evicted_bytes_total)\{pool="(tenant-a|pressure)"\}'); then
    echo "   curl -s $url | grep ..."
    printf '%s\n' "$out" | sed 's/^/   /'
    printf '%s\n' "$out" | grep -q '^gpustate_pool_prefix_hits_total{pool="tenant-a"} [1-9]' || failed "no prefix hits in the metrics"
    printf '%s\n' "$out" | grep -q '^gpustate_pool_evictions_total{pool="pressure"} [1-9]' || failed "no evictions in the metrics"
  else
    failed "curl $url found no gpustate_pool_ metrics"
  fi
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -f "$log"
}
command -v curl >/dev/null || { apt-get update && apt-get install -y curl; } >/dev/null
metrics

# examples/gridsim: sparse checkpoints, At, Plan and rollback of a simulation.
generated examples/gridsim
silent ./examples/gridsim/...
runs examples/gridsim

# examples/replay: a window state sampled with ReadRows, checked against a plain ring buffer.
generated examples/replay
silent ./examples/replay/...
runs examples/replay

# examples/hybrid: a group (KV cache and recurrent state) under speculative decoding and beam
# search, checked against greedy decoding; a member rolled back alone is a finding.
generated examples/hybrid
silent ./examples/hybrid/...
expect examples/hybrid/misuse
runs examples/hybrid

echo
if [ "$fail" -ne 0 ]; then
  echo "demo: FAILED"
  exit 1
fi
echo "demo: ok (valid package clean, $contract_findings expected findings on the faulty package;" \
  "kvcache, gridsim, replay and hybrid generated, vetted and run; $misuse_findings expected findings on kvcache's misuse)"
