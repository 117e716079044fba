//go:build linux

package device

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
)

func openFake(t *testing.T, f *fake) *CUDA {
	t.Helper()
	c, err := OpenCUDA(CUDAOptions{Library: f.Path})
	if err != nil {
		t.Fatalf("OpenCUDA on the fake driver: %v", err)
	}
	return c
}

func TestCUDAFake(t *testing.T) {
	f := fakeDriver(t)
	testBackend(t, func(t *testing.T) Backend { return openFake(t, f) })
	if n := f.Get("badctx"); n != 0 {
		t.Errorf("%d driver calls ran without the primary context current", n)
	}
	if n := f.Get("live"); n != 0 {
		t.Errorf("%d device allocations live after every backend closed", n)
	}
	if n := f.Get("retained"); n != 0 {
		t.Errorf("%d primary context references held after every backend closed", n)
	}
}

// TestCUDAReal runs the same checks against the machine's driver; make
// gpu-check runs it with GPUSTATE_BACKEND=cuda.
func TestCUDAReal(t *testing.T) {
	if os.Getenv(EnvBackend) != "cuda" {
		t.Skip("GPUSTATE_BACKEND is not cuda: the real driver is tested by make gpu-check")
	}
	testBackend(t, func(t *testing.T) Backend {
		c, err := OpenCUDA(CUDAOptions{})
		if err != nil {
			t.Fatalf("OpenCUDA: %v", err)
		}
		return c
	})
}

func TestCUDADevice(t *testing.T) {
	f := fakeDriver(t)
	c := openFake(t, f)
	defer c.Close()
	if c.Name() != "cuda" || c.DeviceName() != "Fake CUDA Device" || c.Library() != f.Path {
		t.Errorf("Name, DeviceName, Library = %q, %q, %q", c.Name(), c.DeviceName(), c.Library())
	}
	uuid, err := c.UUID()
	if err != nil || uuid != "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f" {
		t.Errorf("UUID() = %q, %v", uuid, err)
	}
	free, total, err := c.MemInfo()
	if err != nil || total != 1<<30 || free != total {
		t.Errorf("MemInfo() = %d, %d, %v; want all of 1 GiB free", free, total, err)
	}
	mustAlloc(t, c, 1000)
	if free, _, _ := c.MemInfo(); free != total-1000 {
		t.Errorf("MemInfo free after a 1000-byte Alloc: %d, want %d", free, total-1000)
	}
	if f.Get("calls:cuMemsetD8_v2") != 1 {
		t.Error("Alloc did not zero its memory on the device")
	}
}

func TestCUDAClose(t *testing.T) {
	f := fakeDriver(t)
	a, b := openFake(t, f), openFake(t, f)
	mustAlloc(t, a, 100)
	mustAlloc(t, a, 200)
	q := mustAlloc(t, b, 300)
	if f.Get("live") != 3 || f.Get("retained") != 2 {
		t.Fatalf("live %d, retained %d; want 3, 2", f.Get("live"), f.Get("retained"))
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if f.Get("live") != 1 || f.Get("retained") != 1 {
		t.Fatalf("after Close: live %d, retained %d; want 1, 1", f.Get("live"), f.Get("retained"))
	}
	if err := b.Memset(q, 1, 300); err != nil {
		t.Fatalf("closing one CUDA backend broke another: %v", err)
	}
	if _, err := a.UUID(); !errors.Is(err, ErrClosed) {
		t.Errorf("UUID after Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if f.Get("live") != 0 || f.Get("retained") != 0 {
		t.Fatalf("after both Close: live %d, retained %d", f.Get("live"), f.Get("retained"))
	}
}

func TestCUDAOutOfMemory(t *testing.T) {
	f := fakeDriver(t)
	f.Must(t, "total", 1<<20)
	c := openFake(t, f)
	defer c.Close()
	p := mustAlloc(t, c, 1<<19)
	_, err := c.Alloc(1 << 20)
	if !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("Alloc past the device's memory: got %v, want ErrOutOfMemory", err)
	}
	var ce *CUDAError
	if !errors.As(err, &ce) || ce.Code != 2 || ce.Func != "cuMemAlloc_v2" || ce.Name != "CUDA_ERROR_OUT_OF_MEMORY" {
		t.Fatalf("Alloc past the device's memory: got %#v", ce)
	}
	if f.Get("live") != 1 {
		t.Fatalf("a failed Alloc left %d allocations live, want 1", f.Get("live"))
	}
	if err := c.Free(p); err != nil {
		t.Fatal(err)
	}
	mustAlloc(t, c, 1<<20)
}

// TestCUDAFailures injects a driver failure into each entry point and checks
// that the backend reports it, names the call, and stays usable.
func TestCUDAFailures(t *testing.T) {
	f := fakeDriver(t)
	c := openFake(t, f)
	defer c.Close()
	p := mustAlloc(t, c, 64)
	q := mustAlloc(t, c, 64)
	buf := make([]byte, 64)
	for _, tc := range []struct {
		fn   string
		call func() error
	}{
		{"cuMemAlloc_v2", func() error { _, err := c.Alloc(8); return err }},
		{"cuMemsetD8_v2", func() error { _, err := c.Alloc(8); return err }},
		{"cuMemFree_v2", func() error { return c.Free(q) }},
		{"cuMemcpyHtoD_v2", func() error { return c.CopyHtoD(p, buf) }},
		{"cuMemcpyDtoH_v2", func() error { return c.CopyDtoH(buf, p) }},
		{"cuMemcpyDtoD_v2", func() error { return c.CopyDtoD(q, p, 64) }},
		{"cuMemsetD8_v2", func() error { return c.Memset(p, 1, 64) }},
		{"cuCtxSynchronize", c.Sync},
		{"cuMemGetInfo_v2", func() error { _, _, err := c.MemInfo(); return err }},
		{"cuCtxSetCurrent", func() error { return c.CopyHtoD(p, buf) }},
		{"cuDeviceGetUuid_v2", func() error { _, err := c.UUID(); return err }},
	} {
		live := f.Get("live")
		f.Must(t, "fail:"+tc.fn, 700)
		err := tc.call()
		f.Must(t, "fail:"+tc.fn, 0)
		var ce *CUDAError
		if !errors.As(err, &ce) || ce.Code != 700 || ce.Func != tc.fn || ce.Name != "CUDA_ERROR_ILLEGAL_ADDRESS" {
			t.Errorf("%s failing: got %v", tc.fn, err)
		}
		if errors.Is(err, ErrOutOfMemory) || errors.Is(err, ErrNoDevice) {
			t.Errorf("%s failing with 700: %v matches a sentinel it is not", tc.fn, err)
		}
		if got := f.Get("live"); got != live {
			t.Errorf("%s failing: %d allocations live, want %d", tc.fn, got, live)
		}
	}
	// q survived its failed Free and the failed copies left things usable.
	if err := c.CopyDtoD(q, p, 64); err != nil {
		t.Fatal(err)
	}
	if err := c.Free(q); err != nil {
		t.Fatalf("Free after a failed Free: %v", err)
	}
	// A result the backend does not know is named by cuGetErrorName, or
	// reported by number.
	f.Must(t, "fail:cuCtxSynchronize", 12345)
	err := c.Sync()
	f.Must(t, "fail:cuCtxSynchronize", 0)
	if err == nil || !strings.Contains(err.Error(), "(12345)") {
		t.Errorf("unknown result: got %v", err)
	}
	// A result known only to cuGetErrorName.
	if got := f.Get("calls:cuGetErrorName"); got == 0 {
		t.Error("cuGetErrorName was never asked to name an unknown result")
	}
}

func TestCUDANoDevice(t *testing.T) {
	f := fakeDriver(t)
	for _, tc := range []struct {
		name   string
		key    string
		value  int64
		device int
		nodev  bool
	}{
		{"no devices", "devices", 0, 0, true},
		{"stub library", "init", 34, 0, true},
		{"ordinal past the count", "devices", 2, 2, true},
		{"negative ordinal", "devices", 1, -1, true},
		{"cuInit fails otherwise", "init", 999, 0, false},
		{"cuDeviceGetCount fails", "fail:cuDeviceGetCount", 3, 0, false},
		{"cuDevicePrimaryCtxRetain fails", "fail:cuDevicePrimaryCtxRetain", 2, 0, false},
	} {
		f.Must(t, "reset", 0)
		f.Must(t, tc.key, tc.value)
		c, err := OpenCUDA(CUDAOptions{Library: f.Path, Device: tc.device})
		if err == nil {
			c.Close()
			t.Errorf("%s: OpenCUDA succeeded", tc.name)
			continue
		}
		if c != nil {
			t.Errorf("%s: OpenCUDA returned a backend with its error", tc.name)
		}
		if errors.Is(err, ErrNoDevice) != tc.nodev {
			t.Errorf("%s: errors.Is(%v, ErrNoDevice) = %v, want %v", tc.name, err, !tc.nodev, tc.nodev)
		}
	}
	if f.Get("retained") != 0 {
		t.Errorf("failed opens left %d primary context references", f.Get("retained"))
	}
	// The second device of two.
	f.Must(t, "reset", 0)
	f.Must(t, "devices", 2)
	c, err := OpenCUDA(CUDAOptions{Library: f.Path, Device: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if uuid, _ := c.UUID(); !strings.HasPrefix(uuid, "GPU-10111213-") {
		t.Errorf("device 1 UUID = %q", uuid)
	}
}

func TestCUDAMissingSymbols(t *testing.T) {
	noUUID := fakeDriver(t, "-DFAKE_NO_UUID")
	c := openFake(t, noUUID)
	defer c.Close()
	if _, err := c.UUID(); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("UUID without the symbol: got %v, want errors.ErrUnsupported", err)
	}
	p := mustAlloc(t, c, 10)
	if err := c.Memset(p, 3, 10); err != nil {
		t.Errorf("a backend without the optional symbol: %v", err)
	}

	noMemset := fakeDriver(t, "-DFAKE_NO_MEMSET")
	_, err := OpenCUDA(CUDAOptions{Library: noMemset.Path})
	if err == nil || !strings.Contains(err.Error(), "cuMemsetD8_v2") || errors.Is(err, ErrNoDevice) {
		t.Errorf("library without cuMemsetD8_v2: got %v, want an error naming it", err)
	}
}

func TestCUDAMissingLibrary(t *testing.T) {
	_, err := OpenCUDA(CUDAOptions{Library: "/nonexistent/libcuda.so.1"})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/libcuda.so.1") {
		t.Fatalf("explicit library that does not exist: got %v", err)
	}
	if errors.Is(err, ErrNoDevice) {
		t.Errorf("an explicit library that does not load is a setup error, not a machine without a GPU: %v", err)
	}
	// Not a shared library at all.
	bad := t.TempDir() + "/libcuda.so.1"
	if err := os.WriteFile(bad, []byte("not ELF"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvLibCUDA, bad)
	if _, err := OpenCUDA(CUDAOptions{}); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("$%s naming a non-library: got %v", EnvLibCUDA, err)
	}
}

func TestOpen(t *testing.T) {
	f := fakeDriver(t)
	broken := fakeDriver(t, "-DFAKE_NO_MEMSET")
	for _, tc := range []struct {
		name    string
		backend string
		lib     string
		devices int64
		want    string // backend name, or "" for an error
		nodev   bool   // the error wraps ErrNoDevice
	}{
		{"host", "host", f.Path, 1, "host", false},
		{"cuda", "cuda", f.Path, 1, "cuda", false},
		{"cuda without devices", "cuda", f.Path, 0, "", true},
		{"cuda with a broken driver", "cuda", broken.Path, 1, "", false},
		{"auto", "", f.Path, 1, "cuda", false},
		{"auto spelled out", "auto", f.Path, 1, "cuda", false},
		{"auto without devices", "", f.Path, 0, "host", false},
		{"auto with a broken driver", "", broken.Path, 1, "", false},
		{"unknown", "tpu", f.Path, 1, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.Must(t, "reset", 0)
			f.Must(t, "devices", tc.devices)
			t.Setenv(EnvBackend, tc.backend)
			t.Setenv(EnvLibCUDA, tc.lib)
			b, err := Open()
			if tc.want == "" {
				if err == nil {
					b.Close()
					t.Fatalf("Open() = %s backend, want an error", b.Name())
				}
				if b != nil {
					t.Errorf("Open returned a backend with its error")
				}
				if errors.Is(err, ErrNoDevice) != tc.nodev {
					t.Errorf("errors.Is(%v, ErrNoDevice) = %v", err, !tc.nodev)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer b.Close()
			if b.Name() != tc.want {
				t.Fatalf("Open() = %s backend, want %s", b.Name(), tc.want)
			}
		})
	}
}

// TestOpenDefaultLibrary checks the fallback on a machine whose loader finds
// no libcuda.so.1 or libcuda.so.
func TestOpenDefaultLibrary(t *testing.T) {
	t.Setenv(EnvLibCUDA, "")
	t.Setenv(EnvBackend, "")
	if _, err := dlopen("libcuda.so.1"); err == nil {
		t.Skip("this machine has a CUDA driver library")
	}
	if _, err := dlopen("libcuda.so"); err == nil {
		t.Skip("this machine has a CUDA driver library")
	}
	b, err := Open()
	if err != nil || b.Name() != "host" {
		t.Fatalf("Open() without a driver library = %v, %v; want the host backend", b, err)
	}
	b.Close()
	t.Setenv(EnvBackend, "cuda")
	if _, err := Open(); !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), "libcuda.so.1") {
		t.Fatalf("GPUSTATE_BACKEND=cuda without a driver library: got %v, want ErrNoDevice naming libcuda.so.1", err)
	}
	// Each path once, and the package's prefix once: dlerror's message
	// names the path already.
	if _, err := Open(); strings.Count(err.Error(), "libcuda.so.1") != 1 || strings.Count(err.Error(), "device: cuda:") != 1 {
		t.Errorf("GPUSTATE_BACKEND=cuda without a driver library: %q repeats a path or its prefix", err)
	}
}

// TestCUDASetsContext clears the calling thread's current context before
// each call: every call must make the primary context current itself.
func TestCUDASetsContext(t *testing.T) {
	f := fakeDriver(t)
	c := openFake(t, f)
	defer c.Close()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var p, q Ptr
	buf := make([]byte, 16)
	for _, call := range []func() error{
		func() (err error) { p, err = c.Alloc(16); return err },
		func() (err error) { q, err = c.Alloc(16); return err },
		func() error { return c.CopyHtoD(p, buf) },
		func() error { return c.CopyDtoH(buf, p) },
		func() error { return c.CopyDtoD(q, p, 16) },
		func() error { return c.Memset(p, 1, 16) },
		c.Sync,
		func() error { _, _, err := c.MemInfo(); return err },
		func() error { return c.Free(q) },
		c.Close,
	} {
		if r := f.SetCurrent(0); r != 0 {
			t.Fatalf("clearing the current context: %d", r)
		}
		if err := call(); err != nil {
			t.Error(err)
		}
	}
	if n := f.Get("badctx"); n != 0 {
		t.Errorf("%d driver calls ran without the primary context current", n)
	}
	if f.Get("live") != 0 {
		t.Errorf("Close left %d allocations", f.Get("live"))
	}
}
