#!/usr/bin/env bash
# gpu-check: on a machine with an NVIDIA GPU, run the CUDA backend's tests and
# benchmarks against the real driver (GPUSTATE_BACKEND=cuda) and print the
# figures: device (HBM) copy bandwidth, host-to-device bandwidth, and, where
# runtime/state/internal/store has benchmarks, the store's append and copy-on-write
# throughput as ratios of them. Fails, saying why, on a machine without a
# usable GPU. Bounded to about 5 minutes (GPUCHECK_TIMEOUT, seconds).
#
# Environment: GPUSTATE_LIBCUDA (a driver library other than libcuda.so.1),
# GPUSTATE_LIBNVML (likewise for NVML), CUDA_VISIBLE_DEVICES (device 0 of
# what it leaves is used), GPUCHECK_BENCHTIME (default 0.5s), GPUCHECK_TESTBIN
# (a folder of test binaries that make gpu-bundle built, for a GPU machine
# without Go: they run in place of go test, each in its package's folder).
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
budget=${GPUCHECK_TIMEOUT:-300}
benchtime=${GPUCHECK_BENCHTIME:-0.5s}
start=$SECONDS
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

fail() {
	echo "gpu-check: FAIL: $*" >&2
	exit 1
}

# run_step runs a command under what is left of the budget, its output in
# file $1; it fails with the output's tail, naming a timeout as one.
run_step() {
	local log=$1 what=$2 left rc=0
	shift 2
	left=$(remaining)
	timeout "$left" bash -c '"$@"' run_step "$@" >"$log" 2>&1 || rc=$?
	((rc == 0)) && return 0
	grep -v -e 'Wdeprecated' -e '^cgo-gcc-prolog' -e 'note: declared here' -e '^ *[0-9]* | ' -e '^ *| ' "$log" | tail -60 >&2
	((rc == 124)) && fail "$what ran past the ${budget}s budget"
	grep -q -e 'no CUDA device' -e CUDA_ERROR_NO_DEVICE -e CUDA_ERROR_STUB_LIBRARY "$log" && fail "$what: the CUDA driver reports no usable device (see above)"
	fail "$what failed (see above)"
}

# gotest runs package $1's tests with the test binary's flags that follow:
# through go test, or the binary GPUCHECK_TESTBIN holds for that package.
gotest() {
	local pkg=$1
	shift
	if [[ -z ${GPUCHECK_TESTBIN:-} ]]; then
		"$GO" test "$@" "./$pkg"
		return
	fi
	local bin
	bin=$(cd "$GPUCHECK_TESTBIN" && pwd)/$(tr / _ <<<"$pkg").test
	[[ -x $bin ]] || { echo "gpu-check: no test binary $bin (make gpu-bundle builds it)"; return 1; }
	(cd "$pkg" && "$bin" "$@")
}

# gotests runs gotest for each package of the list $1, stopping at a failure.
gotests() {
	local pkg pkgs=$1
	shift
	for pkg in $pkgs; do
		echo "gpu-check: package $pkg"
		gotest "$pkg" "$@" || return
	done
}

export GO GPUCHECK_TESTBIN=${GPUCHECK_TESTBIN:-}
export -f gotest gotests

# remaining prints the seconds left of the budget, failing when none are.
remaining() {
	local left=$((budget - (SECONDS - start)))
	((left > 10)) || fail "out of time (${budget}s budget)"
	echo "$left"
}

# 1. A driver and a device, before spending time on builds.
# has_libcuda reports whether the dynamic loader can find libcuda.so.1.
has_libcuda() {
	ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 ' && return 0
	local dir
	IFS=: read -r -a dirs <<<"${LD_LIBRARY_PATH:-}"
	for dir in "${dirs[@]}" /usr/lib64 /usr/lib /usr/lib/*-linux-gnu /usr/local/nvidia/lib64 /usr/lib/wsl/lib; do
		[[ -n $dir && -e $dir/libcuda.so.1 ]] && return 0
	done
	return 1
}
if [[ -n ${GPUSTATE_LIBCUDA:-} ]]; then
	[[ -r $GPUSTATE_LIBCUDA ]] || fail "GPUSTATE_LIBCUDA=$GPUSTATE_LIBCUDA is not a readable file"
elif ! has_libcuda; then
	fail "no NVIDIA driver on this machine (the loader finds no libcuda.so.1); gpu-check needs a machine with an NVIDIA GPU and its driver"
fi
if command -v nvidia-smi >/dev/null; then
	nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader 2>/dev/null |
		sed 's/^/gpu-check: nvidia-smi: /' || true
fi

export GPUSTATE_BACKEND=cuda

# 2. Tests: the CUDA backend on the real driver (TestCUDAReal), everything
# else in the device layer (the fake-driver tests included), NVML on the
# real device (TestReal), the kvcache example's PTX kernels on the device
# (TestKernelsCUDA).
echo "gpu-check: tests (GPUSTATE_BACKEND=cuda)"
run_step "$out/test.txt" tests gotests "runtime/device runtime/device/nvml examples/kvcache/kernels" \
	-test.count=1 -test.v -test.run 'CUDA|Open|Real|Scenarios'
grep -E '^(---|ok|FAIL|gpu-check: package)|^\s+(---|nvml_cgo_test.go)' "$out/test.txt" | grep -v '^=== ' || true
grep -q -- '--- PASS: TestCUDAReal' "$out/test.txt" || fail "TestCUDAReal did not run"
grep -q -- '--- PASS: TestKernelsCUDA' "$out/test.txt" || fail "TestKernelsCUDA did not run"

# 3. Benchmarks of the device layer: memmove, the host backend, the CUDA
# backend and the bare driver, side by side.
echo "gpu-check: device benchmarks (benchtime $benchtime)"
run_step "$out/bench.txt" "device benchmarks" gotest runtime/device -test.count=1 -test.run '^$' \
	-test.bench 'Device/' -test.benchtime "$benchtime"
grep '^Benchmark' "$out/bench.txt"

# 4. The store's benchmarks, where it has them; with GPUSTATE_BACKEND=cuda
# those that open their backend with device.Open run on the GPU.
store=""
if gotest runtime/state/internal/store -test.list 'Benchmark' 2>/dev/null | grep -q '^Benchmark'; then
	echo "gpu-check: state store benchmarks"
	run_step "$out/state.txt" "state store benchmarks" gotest runtime/state/internal/store -test.count=1 -test.run '^$' \
		-test.bench . -test.benchtime "$benchtime"
	grep '^Benchmark' "$out/state.txt"
	store="$out/state.txt"
else
	echo "gpu-check: the store has no benchmarks yet; store ratios skipped"
fi

# 5. Figures: MB/s by benchmark name (the -N GOMAXPROCS suffix dropped).
echo
echo "gpu-check: figures (MB/s = 1e6 bytes per second of bytes copied)"
awk -v store="$store" '
# metric returns the value before unit u on a benchmark line, or "".
function metric(line, u,   i, n, f) {
	n = split(line, f, /[ \t]+/)
	for (i = 2; i <= n; i++) if (f[i] == u) return f[i-1]
	return ""
}
function name(s) { sub(/-[0-9]+$/, "", s); sub(/^Benchmark/, "", s); return s }
FNR == NR && /^Benchmark/ { k = name($1); mb[k] = metric($0, "MB/s"); xd[k] = metric($0, "x_driver"); xm[k] = metric($0, "x_memmove"); next }
/^Benchmark/ { v = metric($0, "MB/s"); if (v != "") st[name($1)] = v }
END {
	big = ""
	for (k in mb) if (k ~ /^Device\/cuda\/DtoD\//) { s = k; sub(/.*\//, "", s); if (s ~ /MiB$/ && (big == "" || s + 0 > big + 0)) big = s }
	if (big == "") { print "gpu-check: no CUDA copy figures in the benchmark output" > "/dev/stderr"; exit 1 }
	dtod = mb["Device/cuda/DtoD/" big]; htod = mb["Device/cuda/HtoD/" big]
	printf "  device copy bandwidth (HBM, CopyDtoD, %s):  %10.0f MB/s  (%s x host memmove)\n", big, dtod, xm["Device/cuda/DtoD/" big]
	printf "  host-to-device bandwidth (CopyHtoD, %s):    %10.0f MB/s  (%s x host memmove)\n", big, htod, xm["Device/cuda/HtoD/" big]
	printf "  device-to-host bandwidth (CopyDtoH, %s):    %10.0f MB/s  (%s x host memmove)\n", big, mb["Device/cuda/DtoH/" big], xm["Device/cuda/DtoH/" big]
	printf "  device memset (Memset, %s):                 %10.0f MB/s  (%s x host memmove)\n", big, mb["Device/cuda/Memset/" big], xm["Device/cuda/Memset/" big]
	n = split("HtoD DtoH DtoD Memset", ops, " ")
	m = split("64KiB 16MiB 256MiB", sizes, " ")
	for (i = 1; i <= n; i++) for (j = 1; j <= m; j++) {
		k = "Device/cuda/" ops[i] "/" sizes[j]
		if (xd[k] != "") printf "  backend speed / bare driver, %s %s: %s\n", ops[i], sizes[j], xd[k]
	}
	for (k in st) {
		if (k ~ /[Aa]ppend/) printf "  store %s: %.0f MB/s = %.3f of host-to-device\n", k, st[k], st[k] / htod
		else if (k ~ /CoW|[Cc]opyOnWrite|WriteDevice|[Bb]ranch/) printf "  store %s: %.0f MB/s = %.3f of device copy\n", k, st[k], st[k] / dtod
	}
}' "$out/bench.txt" ${store:+"$store"}
echo "gpu-check: PASS in $((SECONDS - start))s"
