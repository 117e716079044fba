#!/usr/bin/env bash
# statevet's cost under go vet, against the vet driver's floor.
#
# On golang.org/x/tools v0.52.0 ./go/... (from the module cache, copied to a
# temporary directory), it times three runs side by side:
#
#   go vet -vettool=statevet       the whole statevet suite
#   go vet -vettool=statevet -stcontract -stgrowth
#                                  the directive language alone: the
#                                  directives analyzer and its two checkers
#   go vet -lostcancel             the vet driver running one cheap analyzer:
#                                  the floor any vet tool pays for loading and
#                                  type-checking each package
#   go vet                         the full default vet suite, for reference
#
# All three start from the same warm build cache and no cached vet results:
# a GOCACHE is warmed once with `go list -export -deps -test` (every package
# and test variant compiled, nothing vetted), and each timed run gets its own
# copy of it. Runs are interleaved, VETBENCH_REPS times (default 3), and the
# medians are compared. Prints a Markdown table for docs/BENCHMARKS.md.
#
# VETBENCH_PKGS (default ./go/...) selects the packages.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
reps=${VETBENCH_REPS:-3}
pkgs=${VETBENCH_PKGS:-./go/...}

src=$(go env GOMODCACHE)/golang.org/x/tools@v0.52.0
if [ ! -d "$src" ]; then
  go mod download golang.org/x/tools
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/vetbench.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# A private binary: nothing else may rebuild it while the runs are timed.
statevet=$work/statevet
go build -o "$statevet" ./cmd/statevet
analyzers=$("$statevet" help | awk '/^Registered analyzers:/ {on = 1; next} on && NF == 0 && n {exit} on && NF {n++; printf "%s%s", (n > 1 ? ", " : ""), $1}')
cp -r "$src" "$work/tools"
chmod -R u+w "$work/tools"
cd "$work/tools"
export GOFLAGS=-mod=mod GOPROXY=off GOWORK=off GOTOOLCHAIN=local

echo "warming a build cache: go list -export -deps -test $pkgs" >&2
GOCACHE=$work/warm go list -export -deps -test $pkgs >/dev/null

# run NAME ARGS...: one timed go vet on a fresh copy of the warm cache;
# prints the seconds. Findings go to $work/NAME.out.
run() {
  local name=$1; shift
  rm -rf "$work/cache"
  cp -a "$work/warm" "$work/cache"
  local t0 t1
  t0=$(date +%s.%N)
  GOCACHE=$work/cache go vet "$@" $pkgs >"$work/$name.out" 2>&1 || true
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}

declare -A times
tools=(statevet contract lostcancel vet)
for ((i = 0; i < reps; i++)); do
  # Rotate the order so that drift in the machine's load spreads evenly.
  for ((j = 0; j < ${#tools[@]}; j++)); do
    t=${tools[$(((i + j) % ${#tools[@]}))]}
    case $t in
      statevet) s=$(run statevet -vettool="$statevet") ;;
      contract) s=$(run contract -vettool="$statevet" -stcontract -stgrowth) ;;
      lostcancel) s=$(run lostcancel -lostcancel) ;;
      vet) s=$(run vet) ;;
    esac
    echo "rep $((i + 1)) $t: ${s}s" >&2
    times[$t]="${times[$t]:-} $s"
  done
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
sv=$(echo "${times[statevet]}" | median)
sc=$(echo "${times[contract]}" | median)
lc=$(echo "${times[lostcancel]}" | median)
gv=$(echo "${times[vet]}" | median)
findings=$(grep -cE '\.go:[0-9]+:[0-9]+: ' "$work/statevet.out" || true)
npkgs=$(go list $pkgs | wc -l)

ratio() { echo "scale=4; $1 / $2" | bc | xargs printf '%.2f'; }
secs() { printf '%.1f' "$1"; }
cat <<EOT

| run (golang.org/x/tools v0.52.0 $pkgs, $npkgs packages; median of $reps) | seconds | vs go vet -lostcancel |
| --- | ---: | ---: |
| go vet -vettool=statevet (whole suite) | $(secs $sv) | $(ratio $sv $lc)x |
| go vet -vettool=statevet -stcontract -stgrowth | $(secs $sc) | $(ratio $sc $lc)x |
| go vet -lostcancel | $(secs $lc) | 1.00x |
| go vet (default suite) | $(secs $gv) | $(ratio $gv $lc)x |

statevet analyzers: $analyzers. statevet findings on x/tools: $findings. Machine: $(nproc) cores, $(go version | awk '{print $3}').
Every run (seconds, in rep order): $(for t in "${tools[@]}"; do printf '%s' "$t"; for x in ${times[$t]}; do printf ' %.1f' "$x"; done; printf '; '; done)
EOT
