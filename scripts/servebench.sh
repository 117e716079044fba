#!/usr/bin/env bash
# The serving-path figures of docs/BENCHMARKS.md ("Serving paths", "Eviction",
# "Cost model"), every row in one run of this script: one test binary of
# ./runtime/state/internal/store, each row's benchmark run in turn, SERVEBENCH_ROUNDS times
# (default 3), so that the rows of one round share the machine's state.
# Prints one line a benchmark and round: its name and the metric each row
# is judged by (a store/baseline ratio, or the cost model's counts). Then,
# each round, the serving workloads against the hand-written peer
# (internal/peerbench): CPU time per step of each side, their ratio, and
# allocations per step; then the same workloads on GOMAXPROCS goroutines at
# once, each with sessions of its own (BenchmarkPeerParallel): the CPU ratio
# at once and each side's speedup from running its goroutines at once.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${SERVEBENCH_ROUNDS:-3}
bin=$(mktemp -d)/state.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" ./runtime/state/internal/store
peer=$(dirname "$bin")/peerbench.test
go test -c -o "$peer" ./internal/peerbench

# row: benchmark pattern, benchtime
rows=(
  'ServingBulkAppend$ 1s'
  'ServingAppendAsync$ 1s'
  'ServingAppendOneRow$ 1s'
  'EvictCached$ 100x'
  'BlockAlloc$ 1s'
  'CostModel$ 1x'
)
for r in $(seq "$rounds"); do
  echo "round $r"
  for row in "${rows[@]}"; do
    set -- $row
    (cd runtime/state/internal/store && "$bin" -test.run='^$' -test.bench="$1" -test.benchtime="$2") |
      awk '/^Benchmark/ {
        line = $1
        for (i = 3; i < NF; i += 2)
          if ($(i+1) ~ /ratio|within|worst/) line = line "  " $(i+1) "=" $i
        print "  " line
      }'
  done
done
# peers TITLE BENCH BENCHTIME METRICS: SERVEBENCH_ROUNDS rounds of the
# peer benchmark BENCH, printing the metrics whose names match METRICS.
peers() {
  for r in $(seq "$rounds"); do
    echo "$1 $r"
    (cd internal/peerbench && "$peer" -test.run='^$' -test.bench="^$2\$" -test.benchtime="$3") |
      awk -v want="$4" '/^Benchmark/ {
        line = $1
        for (i = 3; i < NF; i += 2)
          if ($(i+1) ~ want) line = line "  " $(i+1) "=" $i
        print "  " line
      }'
  done
}
peers "peer round" BenchmarkPeer 4x 'ratio|allocs|excess'
peers "peer at once, round" BenchmarkPeerParallel 3x 'ratio|scale'
