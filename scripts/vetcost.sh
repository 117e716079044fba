#!/usr/bin/env bash
# statevet's cost against plain go vet, side by side: wall time and peak memory.
#
#   scripts/vetcost.sh vettool      go vet -vettool=statevet against go vet
#   scripts/vetcost.sh standalone   statevet PKGS (standalone) against go vet PKGS
#
# VETCOST_TARGET picks the packages:
#   tools      golang.org/x/tools v0.52.0 ./go/... (default)
#   std        the standard library (go vet std)
#   golangci   github.com/golangci/golangci-lint/v2 v2.15.0 ./... (a large module and
#              its dependency tree; fetched through the module proxy when not cached)
# Modules are copied from the module cache to a temporary directory and run offline.
# VETCOST_PKGS overrides the target's package patterns (VETCOST_PKGS=./... for all of x/tools).
#
# Every timed run starts from the same warm build cache and no cached vet results: a GOCACHE
# is warmed once with `go list -export -deps -test PKGS` (every package and test variant
# compiled, nothing vetted) and each run gets a fresh copy of it. Runs are interleaved in
# rotating order, VETCOST_REPS times (default 3); /usr/bin/time gives each run's wall time and
# peak resident set size (that of the largest process: the go command or one vet tool process
# for go vet, and for a standalone statevet, which runs go vet itself, the same). Medians are
# compared. VETCOST_OLD=path adds another statevet binary to the standalone runs (an older
# build, to compare drivers). Prints a Markdown table for docs/BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-vettool}
target=${VETCOST_TARGET:-tools}
reps=${VETCOST_REPS:-3}
case $mode in vettool | standalone) ;; *) echo "usage: $0 vettool|standalone" >&2; exit 2 ;; esac

work=$(mktemp -d "${TMPDIR:-/tmp}/vetcost.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
# A private binary: nothing else may rebuild it while the runs are timed.
statevet=$work/statevet
go build -o "$statevet" ./cmd/statevet

# module PATH VERSION: copy a module from the module cache (downloading it first if need be).
module() {
  local dir
  dir=$(go mod download -json "$1@$2" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  cp -r "$dir" "$work/src"
  chmod -R u+w "$work/src"
  (cd "$work/src" && GOFLAGS=-mod=mod go mod download >/dev/null)
}
case $target in
  tools) module golang.org/x/tools v0.52.0; pkgs=./go/... ;;
  golangci) module github.com/golangci/golangci-lint/v2 v2.15.0; pkgs=./... ;;
  std) mkdir "$work/src"; pkgs=std ;;
  *) echo "unknown VETCOST_TARGET $target" >&2; exit 2 ;;
esac
pkgs=${VETCOST_PKGS:-$pkgs}
cd "$work/src"
export GOFLAGS=-mod=mod GOPROXY=off GOWORK=off GOTOOLCHAIN=local
[ "$target" = std ] && export GOFLAGS=

echo "warming a build cache: go list -export -deps -test $pkgs" >&2
GOCACHE=$work/warm go list -export -deps -test $pkgs >/dev/null

# run NAME CMD...: one run on a fresh copy of the warm cache; prints "seconds kilobytes".
run() {
  local name=$1; shift
  rm -rf "$work/cache"
  cp -a "$work/warm" "$work/cache"
  GOCACHE=$work/cache /usr/bin/time -f '%e %M' -o "$work/time" "$@" $pkgs >"$work/$name.out" 2>&1 || true
  tail -n 1 "$work/time"
}

if [ "$mode" = vettool ]; then
  tools=(statevet vet)
else
  tools=(statevet vet)
  [ -n "${VETCOST_OLD:-}" ] && tools+=(old)
fi
declare -A secs mem
for ((i = 0; i < reps; i++)); do
  for ((j = 0; j < ${#tools[@]}; j++)); do
    t=${tools[$(((i + j) % ${#tools[@]}))]}
    case $mode/$t in
      vettool/statevet) r=$(run "$t" go vet -vettool="$statevet") ;;
      standalone/statevet) r=$(run "$t" "$statevet") ;;
      standalone/old) r=$(run "$t" "$VETCOST_OLD") ;;
      */vet) r=$(run "$t" go vet) ;;
    esac
    read -r s k <<<"$r"
    echo "rep $((i + 1)) $t: ${s}s, $((k / 1024)) MiB" >&2
    secs[$t]="${secs[$t]:-} $s"
    mem[$t]="${mem[$t]:-} $k"
  done
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { echo "scale=4; $1 / $2" | bc | xargs printf '%.2f'; }
npkgs=$(go list $pkgs 2>/dev/null | wc -l)
gs=$(echo "${secs[vet]}" | median)
gm=$(echo "${mem[vet]}" | median)
case $mode in
  vettool) label() { case $1 in statevet) echo "go vet -vettool=statevet" ;; vet) echo "go vet" ;; esac; } ;;
  standalone) label() { case $1 in statevet) echo "statevet (standalone)" ;; old) echo "statevet (VETCOST_OLD)" ;; vet) echo "go vet" ;; esac; } ;;
esac
echo
echo "| run ($target $pkgs, $npkgs packages; median of $reps) | seconds | vs go vet | peak RSS MiB | vs go vet |"
echo "| --- | ---: | ---: | ---: | ---: |"
for t in "${tools[@]}"; do
  s=$(echo "${secs[$t]}" | median)
  m=$(echo "${mem[$t]}" | median)
  printf '| %s | %.1f | %sx | %d | %sx |\n' "$(label "$t")" "$s" "$(ratio "$s" "$gs")" "$((${m%.*} / 1024))" "$(ratio "$m" "$gm")"
done
echo
echo "statevet findings: $(grep -cE '\.go:[0-9]+:[0-9]+: ' "$work/statevet.out" || true); go vet findings: $(grep -cE '\.go:[0-9]+:[0-9]+: ' "$work/vet.out" || true). Machine: $(nproc) cores, $(go version | awk '{print $3}')."
printf 'Every run (seconds/MiB, in rep order):'
for t in "${tools[@]}"; do
  printf ' %s' "$t"
  read -ra ss <<<"${secs[$t]}"
  read -ra mm <<<"${mem[$t]}"
  for ((k = 0; k < ${#ss[@]}; k++)); do printf ' %.1f/%d' "${ss[$k]}" "$((mm[k] / 1024))"; done
  printf ';'
done
echo
