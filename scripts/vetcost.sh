#!/usr/bin/env bash
# What replacing go vet with statevet as its vet tool costs: statevet runs go vet's own default
# analyzers and its own, so `go vet -vettool=statevet` is compared with plain `go vet`.
#
# On golang.org/x/tools v0.52.0 ./go/... (from the module cache, copied to a temporary
# directory), from the same warm build cache and no cached vet results (a GOCACHE warmed once
# with `go list -export -deps -test`, a fresh copy of it for each run), the two runs alternate
# VETCOST_REPS times (default 7), in alternating order. Each run's wall time and CPU time (user
# plus system, of go vet and every process it starts) are recorded; on a shared machine the CPU
# time is the steadier figure. Prints a Markdown table for docs/BENCHMARKS.md: medians, and the
# median of the ratios paired within each rep.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${VETCOST_REPS:-7}
pkgs=${VETCOST_PKGS:-./go/...}

src=$(go env GOMODCACHE)/golang.org/x/tools@v0.52.0
[ -d "$src" ] || go mod download golang.org/x/tools
work=$(mktemp -d "${TMPDIR:-/tmp}/vetcost.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
statevet=$work/statevet
go build -o "$statevet" ./cmd/statevet
cp -r "$src" "$work/tools"
chmod -R u+w "$work/tools"
cd "$work/tools"
export GOFLAGS=-mod=mod GOPROXY=off GOWORK=off GOTOOLCHAIN=local
echo "warming a build cache: go list -export -deps -test $pkgs" >&2
GOCACHE=$work/warm go list -export -deps -test $pkgs >/dev/null

# run NAME ARGS...: one go vet on a fresh copy of the warm cache; prints "wall cpu" in seconds.
run() {
  local name=$1; shift
  rm -rf "$work/cache"
  cp -a "$work/warm" "$work/cache"
  local TIMEFORMAT='%R %U %S'
  { time (GOCACHE=$work/cache go vet "$@" $pkgs >"$work/$name.out" 2>&1 || true) ; } 2>&1 |
    awk '{printf "%.3f %.3f\n", $1, $2 + $3}'
}

declare -a vw vc sw sc
for ((i = 0; i < reps; i++)); do
  for t in $( ((i % 2)) && echo "statevet vet" || echo "vet statevet"); do
    if [ "$t" = vet ]; then read -r w c < <(run vet); vw+=("$w"); vc+=("$c")
    else read -r w c < <(run statevet -vettool="$statevet"); sw+=("$w"); sc+=("$c"); fi
    echo "rep $((i + 1)) $t: wall ${w}s cpu ${c}s" >&2
  done
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
paired() { # paired A[@] B[@]: the median of A[i]/B[i]
  local -n a=$1 b=$2
  for ((i = 0; i < ${#a[@]}; i++)); do echo "${a[$i]} ${b[$i]}" | awk '{printf "%.4f ", $1 / $2}'; done | median
}
f() { printf '%.2f' "$1"; }
vetfindings=$(grep -cE '\.go:[0-9]+:[0-9]+: ' "$work/vet.out" || true)
svfindings=$(grep -cE '\.go:[0-9]+:[0-9]+: ' "$work/statevet.out" || true)
cat <<EOT

| golang.org/x/tools v0.52.0 $pkgs, $reps reps | go vet | go vet -vettool=statevet | ratio of medians | median paired ratio |
| --- | ---: | ---: | ---: | ---: |
| wall seconds (median) | $(f "$(echo "${vw[*]}" | median)") | $(f "$(echo "${sw[*]}" | median)") | $(f "$(echo "$(echo "${sw[*]}" | median) $(echo "${vw[*]}" | median)" | awk '{print $1 / $2}')")x | $(f "$(paired sw vw)")x |
| CPU seconds (median) | $(f "$(echo "${vc[*]}" | median)") | $(f "$(echo "${sc[*]}" | median)") | $(f "$(echo "$(echo "${sc[*]}" | median) $(echo "${vc[*]}" | median)" | awk '{print $1 / $2}')")x | $(f "$(paired sc vc)")x |

Findings: go vet $vetfindings, go vet -vettool=statevet $svfindings. Machine: $(nproc) cores, $(go version | awk '{print $3}'), load average $(cut -d' ' -f1-3 /proc/loadavg) at the end.
Every run (wall/CPU seconds, in rep order): go vet $(for ((i = 0; i < reps; i++)); do printf '%.1f/%.1f ' "${vw[$i]}" "${vc[$i]}"; done); statevet $(for ((i = 0; i < reps; i++)); do printf '%.1f/%.1f ' "${sw[$i]}" "${sc[$i]}"; done)
EOT
