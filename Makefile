# gpustate: build, test and demo. Every target installs or builds what it needs.

GO      ?= go
PKGS    ?= ./...
FUZZTIME ?= 30s
MODELSTEPS ?= 200000

# go-nvml's header marks many entry points deprecated; setting CGO_CFLAGS replaces Go's default,
# so keep -O2 -g. Never add -z now to link flags: go-nvml resolves its symbols lazily.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

# statevet on the repository itself: the examples' deliberate misuse is excluded (make demo
# checks it), and so are tests, which misuse handles on purpose to check the runtime's errors.
VET_PKGS = $$($(GO) list ./... | grep -v -e /examples/contracts/faulty -e /examples/kvcache/misuse)

.PHONY: all build test generated vettool vet fuzz demo bench gpu-check gpu-bundle ptx vet-bench serve-bench precision golangci-lint golangci-check clean

all: build

build:
	$(GO) build $(PKGS)
	CGO_ENABLED=0 $(GO) build $(PKGS)
	$(GO) build -o bin/statevet ./cmd/statevet
	$(GO) build -o bin/stategen ./cmd/stategen

# Every test, under the race detector where cgo works; fuzz seed corpora run as plain tests.
# scripts/testprogress prints each package as it finishes, and every minute those still running.
test: build
	@if $(GO) env CGO_ENABLED | grep -q 1 && command -v gcc >/dev/null; then \
		echo "go test -race $(PKGS)"; $(GO) run ./scripts/testprogress -race -count=1 $(PKGS); \
	else \
		echo "go test $(PKGS) (no cgo: race detector unavailable)"; $(GO) run ./scripts/testprogress -count=1 $(PKGS); \
	fi
	$(MAKE) vet

# What make demo checks, for CI: every committed generated file is current, and the examples'
# expected findings hold (make demo runs them, with the examples themselves).
generated:
	$(GO) run ./cmd/stategen -check ./...

# go vet with statevet as its vet tool must report the misuse example's findings: a vet tool that
# went missing (an empty -vettool=) would let go vet pass silently.
vettool: build
	bash scripts/vettool-check.sh

# go vet plus statevet on the repository itself.
vet: build
	$(GO) vet $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v /testdata/))" || { echo "not gofmt'd:"; gofmt -l $$(git ls-files '*.go' | grep -v /testdata/); exit 1; }
	./bin/statevet -test=false $(VET_PKGS)

# A short fuzz run of every fuzz target, and the state store's model tests run long
# (MODELSTEPS steps per seed, their -model.steps flag).
fuzz:
	bash scripts/fuzz.sh $(FUZZTIME) $(MODELSTEPS)

demo: build
	bash scripts/demo.sh
	bash scripts/vettool-check.sh

bench:
	$(GO) test -run='^$$' -bench=. -benchmem $(PKGS)

# statevet's cost against the vet driver's floor, and against plain go vet, on golang.org/x/tools,
# and on a module full of state types, where the dataflow analyzers do real work.
vet-bench: build
	bash scripts/vetbench.sh
	bash scripts/vetcost.sh

# The serving paths' figures (docs/BENCHMARKS.md), every row in one run.
serve-bench:
	bash scripts/servebench.sh
	$(GO) test -run='^$$' -bench=VetStateHeavy -benchtime=3x ./analyzers/stcleanup

# statevet over golang.org/x/tools and the standard library: no findings, no failures.
precision: build
	bash scripts/precision.sh

# golangci-lint v2 with the statevet analyzers compiled in as module plugins, built from the Go
# module proxy alone (tools/golangci-lint is its own module, so golangci-lint's dependencies stay
# out of go.mod). A cold build takes minutes; make test does not need it.
golangci-lint:
	bash scripts/golangci-build.sh bin/golangci-lint-statevet

# The statevet analyzers under that binary: findings, //nolint, //statevet:ignore, SARIF, --fix
# and the command line VS Code runs.
golangci-check: golangci-lint
	bash scripts/golangci-check.sh

# On a machine with an NVIDIA GPU: the CUDA backend's tests and benchmarks.
gpu-check:
	bash scripts/gpu-check.sh

# gpu-check's test binaries, for a GPU machine without Go: copy the repository with bin/gpu-check
# there and run GPUCHECK_TESTBIN=bin/gpu-check bash scripts/gpu-check.sh.
GPU_PKGS = runtime/device runtime/device/nvml examples/kvcache/kernels runtime/state/internal/store
gpu-bundle:
	@mkdir -p bin/gpu-check
	for p in $(GPU_PKGS); do $(GO) test -c -o bin/gpu-check/$$(echo $$p | tr / _).test ./$$p || exit; done

# The kvcache example's kernels: CUDA C to PTX with LLVM's NVPTX backend (Debian's clang; no CUDA
# toolkit), installing clang where it is missing. TestPTXUpToDate checks the committed PTX.
PTX_FLAGS = -x cuda --cuda-device-only --cuda-gpu-arch=sm_80 -nocudainc -nocudalib -O2 -S
ptx:
	@command -v clang >/dev/null || { apt-get update && apt-get install -y clang; }
	cd examples/kvcache/kernels && clang $(PTX_FLAGS) -o kvcache.ptx kvcache.cu

clean:
	rm -rf bin
