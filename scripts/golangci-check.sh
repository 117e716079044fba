#!/usr/bin/env bash
# The statevet analyzers under golangci-lint v2, as module plugins of the custom binary that
# tools/golangci-lint builds (make golangci-lint; a cold build takes minutes). Checks:
#   - the linter statevet reports exactly the findings examples/kvcache/misuse/expected.txt
#     lists (facts cross from package cache to package misuse), and so does the example
#     configuration tools/golangci-lint/golangci.example.yml, each once (every line of a
#     statevet analyzer counts, whichever linter it names);
#   - one linter per analyzer: each finding is attributed to its analyzer by name;
#   - //nolint:NAME silences the finding of every analyzer NAME under both configurations (the
#     statevet linter and one linter per analyzer, where nolintlint finds nothing unused), a
#     silenced leak takes its related information with it, and //statevet:ignore silences a
#     finding through golangci-lint too;
#   - the example configuration leaves the docs' defer x.Release() alone (errcheck);
#   - --output.sarif.path writes a valid SARIF 2.1.0 log (internal/sarif/sarifcheck);
#   - the command line VS Code's Go extension runs for "go.lintTool": "golangci-lint-v2"
#     prints absolute file:line:col lines and exits 0;
#   - --fix applies a suggested fix.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
bin=${GOLANGCI_LINT:-$repo/bin/golangci-lint-statevet}
[ -x "$bin" ] || bash scripts/golangci-build.sh "${bin#"$repo"/}"
work=$(mktemp -d "${TMPDIR:-/tmp}/golangci-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
export GOWORK=off
failed=0
fail() { echo "FAIL: $*" >&2; failed=1; }

# Configurations with golangci-lint's own linters off, so that only statevet speaks.
cat >"$work/all.yml" <<'EOT'
version: "2"
linters:
  default: none
  enable: [statevet]
  settings:
    custom:
      statevet: {type: module}
      stcontract: {type: module}
      stgrowth: {type: module}
      stcleanup: {type: module}
      stalias: {type: module}
      streleased: {type: module}
EOT
cat >"$work/each.yml" <<'EOT'
version: "2"
linters:
  default: none
  enable: [stcontract, stgrowth, stcleanup, stalias, streleased, nolintlint]
  settings:
    custom:
      stcontract: {type: module}
      stgrowth: {type: module}
      stcleanup: {type: module}
      stalias: {type: module}
      streleased: {type: module}
EOT
text=(--output.text.print-issued-lines=false --show-stats=false --output.text.path=stdout --path-mode=abs)

# findings FILE: the "file:line: message" of each finding in golangci-lint's text output, the
# file relative to the repository, the column and the "(linter)" suffix cut.
findings() { sed -nE "s|^$repo/([^:]+):([0-9]+):[0-9]+: (.*) \\(([a-z]+)\\)\$|\\1:\\2: \\3 (\\4)|p" "$1" | sort; }

# expect OUT: every finding in expected.txt is in OUT and OUT has no other.
expect() {
  local out=$1 want n=0
  while IFS= read -r want; do
    case $want in ''|'#'*) continue ;; esac
    n=$((n + 1))
    local file=${want%%: *} msg=${want#*: }
    grep -qF "examples/kvcache/misuse/$file: " <(findings "$out" | grep -F "$msg") ||
      fail "$out: missing examples/kvcache/misuse/$want"
  done <examples/kvcache/misuse/expected.txt
  local got
  got=$(findings "$out" | wc -l)
  [ "$got" -eq "$n" ] || fail "$out: $got findings, want $n:
$(findings "$out")"
}

echo "== statevet linter on examples/kvcache/misuse"
"$bin" run -c "$work/all.yml" --build-tags statevet_demo "${text[@]}" \
  --output.sarif.path="$work/all.sarif" ./examples/kvcache/misuse >"$work/all.out" 2>&1 || true
expect "$work/all.out"
[ "$(findings "$work/all.out" | grep -vc ' (statevet)$' || true)" -eq 0 ] ||
  fail "findings not attributed to the statevet linter:
$(cat "$work/all.out")"

echo "== SARIF output"
if sarif=$(go run ./internal/sarif/sarifcheck "$work/all.sarif"); then
  [ "$sarif" = "$work/all.sarif statevet 6" ] || fail "SARIF results: $sarif, want 6 of rule statevet"
else
  fail "golangci-lint's SARIF log is not valid SARIF 2.1.0"
fi

echo "== one linter per analyzer"
"$bin" run -c "$work/each.yml" --build-tags statevet_demo "${text[@]}" ./examples/kvcache/misuse \
  >"$work/each.out" 2>&1 || true
expect "$work/each.out"
for pair in 33:stgrowth 44:stcleanup 49:stcleanup 91:stalias 99:stgrowth 107:streleased; do
  grep -qE "misuse\.go:${pair%%:*}:[0-9]+: .* \\(${pair#*:}\\)\$" "$work/each.out" ||
    fail "line ${pair%%:*} is not reported by linter ${pair#*:}:
$(cat "$work/each.out")"
done

echo "== example configuration"
"$bin" run -c tools/golangci-lint/golangci.example.yml --build-tags statevet_demo "${text[@]}" \
  ./examples/kvcache/misuse >"$work/example.out" 2>&1 || true
# Its golangci-lint defaults (errcheck, unused, ...) speak too; uniq-by-line: false keeps
# errcheck's finding on line 99 from hiding stgrowth's. Every line of a statevet analyzer counts,
# whichever linter it names: a finding reported under statevet and again under its analyzer's
# own linter (a declared plugin runs unless disabled) would make twelve.
analyzer_lines=' \((statevet|stcontract|stgrowth|stcleanup|stalias|streleased)\)$'
[ "$(findings "$work/example.out" | grep -cE "$analyzer_lines" || true)" -eq 6 ] &&
  [ "$(findings "$work/example.out" | grep -c ' (statevet)$' || true)" -eq 6 ] ||
  fail "the example configuration does not report the six findings, each once, under statevet:
$(cat "$work/example.out")"
[ "$(grep -cE "$analyzer_lines" "$work/example.out" || true)" -eq 6 ] ||
  fail "the example configuration prints $(grep -cE "$analyzer_lines" "$work/example.out" || true) lines of statevet's analyzers, want 6:
$(cat "$work/example.out")"

# A scratch module that requires this repository, with every finding of misuse.go silenced, a
# contract with a fixable fault beside one silenced, and the docs' deferred Release.
mod=$work/mod
mkdir -p "$mod/misuse" "$mod/fixme" "$mod/deferred"
printf 'module example.com/fixture\n\ngo 1.26\n\nrequire github.com/gpustate/gpustate v0.0.0\n\nreplace github.com/gpustate/gpustate => %s\n' "$repo" >"$mod/go.mod"
cp go.sum "$mod/go.sum"
# Line 31 is a blank line of Transcript's doc comment, whose line 33 lacks a bound (a //nolint
# covers its comment group); line 44 acquires the leaked snapshot (its related information, the
# leaking return, is line 49, which golangci-lint would make an issue of its own); line 91 writes
# through a snapshot; line 99 drops an append error in a loop; line 107 uses a released handle.
sed -e '31s|.*|//nolint:stgrowth // the check silences the missing bound|' \
  -e '44s|$| //nolint:stcleanup // the check silences the leak|' \
  -e '91s|$| //nolint:stalias // the check silences the write|' \
  -e '99s|^|\t\t//statevet:ignore stgrowth reason="the check silences the dropped error"\n|' \
  -e '107s|$| //nolint:streleased // the check silences the use after release|' \
  examples/kvcache/misuse/misuse.go >"$mod/misuse/misuse.go"
cat >"$mod/fixme/fixme.go" <<'EOT'
package fixme

//state:contract
//state:growth append bound=8
//state:owner session
//state:branch isolated
type Fixable struct{ X []int32 }

// Silenced has the same fault, silenced.
//
//nolint:stcontract // the check silences the missing merge decision
//state:contract
//state:growth append bound=8
//state:owner session
//state:branch isolated
type Silenced struct{ X []int32 }
EOT
cat >"$mod/deferred/deferred.go" <<'EOT'
package deferred

import (
	"github.com/gpustate/gpustate/examples/kvcache/cache"
	"github.com/gpustate/gpustate/runtime/state"
)

// Deferred releases its handle as the docs teach.
func Deferred(p *state.Pool) error {
	s, err := cache.NewKVCacheState(p, "session")
	if err != nil {
		return err
	}
	defer s.Release()
	return s.Append(cache.KVCache{})
}

// Dropped drops the error of a Release that is not deferred.
func Dropped(p *state.Pool) {
	s, err := cache.NewKVCacheState(p, "session")
	if err != nil {
		return
	}
	s.Release()
}
EOT
cd "$mod"
export GOFLAGS=-mod=mod GOPROXY=off

# only FILE: the findings of OUT, file relative to the scratch module.
only() { local r=$repo; repo=$mod; findings "$1"; repo=$r; }
want_fixme="isolated branches of Fixable need a merge decision"

for cfg in all each; do
  echo "== //nolint:NAME for every analyzer, and //statevet:ignore, under $cfg.yml"
  "$bin" run -c "$work/$cfg.yml" --build-tags statevet_demo "${text[@]}" ./misuse ./fixme >"$work/nolint-$cfg.out" 2>&1 || true
  got=$(only "$work/nolint-$cfg.out")
  # One finding remains: Fixable's. None of misuse.go's, nor the related information of the
  # silenced leak (line 49), nor Silenced's; and nolintlint finds every //nolint used.
  if [ "$(grep -c . <<<"$got")" -ne 1 ] || ! grep '^fixme/fixme.go:6: ' <<<"$got" | grep -qF "$want_fixme"; then
    fail "under $cfg.yml, want only fixme.go:6: $want_fixme, have:
$(cat "$work/nolint-$cfg.out")"
  fi
  ! grep -q "unknown linters" "$work/nolint-$cfg.out" || fail "under $cfg.yml, golangci-lint warns of unknown linters:
$(cat "$work/nolint-$cfg.out")"
done

echo "== the example configuration: the docs' defer x.Release() is no errcheck finding"
"$bin" run -c "$repo/tools/golangci-lint/golangci.example.yml" "${text[@]}" ./deferred >"$work/deferred.out" 2>&1 || true
got=$(only "$work/deferred.out")
if [ "$(grep -c . <<<"$got")" -ne 1 ] || ! grep -qE '^deferred/deferred.go:24: Error return value of `s.Release` is not checked \(errcheck\)$' <<<"$got"; then
  fail "want errcheck on the dropped Release (line 24) alone, not on the deferred one (line 14); have:
$(cat "$work/deferred.out")"
fi

echo "== the command line of VS Code's Go extension"
(cd fixme && "$bin" run --build-tags=statevet_demo -c "$work/all.yml" --issues-exit-code=0 \
  --output.text.print-issued-lines=false --show-stats=false --output.text.path=stdout --path-mode=abs) \
  >"$work/vscode.out" 2>"$work/vscode.err" || fail "VS Code's command line failed: $(cat "$work/vscode.err")"
n=$(grep -cE "^$mod/fixme/fixme\.go:[0-9]+:[0-9]+: " "$work/vscode.out" || true)
[ "$n" -eq 1 ] || fail "VS Code's command line printed $n absolute file:line:col findings, want 1 (Fixable's):
$(cat "$work/vscode.out")"

echo "== --fix"
"$bin" run -c "$work/all.yml" --fix "${text[@]}" ./fixme >"$work/fix.out" 2>&1 || true
grep -q '^//state:branch isolated merge=unsupported$' fixme/fixme.go ||
  fail "--fix did not add merge=unsupported:
$(cat fixme/fixme.go)
$(cat "$work/fix.out")"

if [ "$failed" -ne 0 ]; then
  echo "golangci-check: FAILED" >&2
  exit 1
fi
echo "golangci-check: ok (statevet under golangci-lint $("$bin" version --short 2>/dev/null || "$bin" version))"
