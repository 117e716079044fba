//go:build linux

package device

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// CUDAOptions configures OpenCUDA.
type CUDAOptions struct {
	// Library is the path of the CUDA driver library to load. Empty means
	// the path in $GPUSTATE_LIBCUDA when that is set, else libcuda.so.1 and
	// then libcuda.so as the dynamic loader finds them.
	Library string
	// Device is the ordinal of the device to use, as the driver numbers the
	// devices it shows (after CUDA_VISIBLE_DEVICES).
	Device int
}

// CUDA is the backend over the CUDA driver API. It is loaded at run time
// with purego, so building it needs neither cgo nor the CUDA toolkit. Every
// call makes the device's primary context current on the calling OS thread
// first, so a CUDA backend may be used from any goroutine; the context stays
// current there afterwards, as it would under the CUDA runtime, which uses
// the same primary context. Allocations are
// tracked on the host side: a Ptr or length outside them is an error
// wrapping ErrInvalidPtr and never reaches the driver. Alloc returns zeroed
// memory. Copies from and to the host return once the host buffer may be
// reused; CopyDtoD and Memset may still run on the device when they return,
// until Sync.
type CUDA struct {
	d       *driver
	ord     int32 // the device's ordinal
	dev     int32 // the driver's handle for it
	ctx     uintptr
	name    string
	library string

	mu     sync.RWMutex // write-held to change allocs, read-held to use them
	allocs table
	closed bool
	// blocking counts the driver calls in progress without mu, those that
	// may wait for the device (allocation, free, synchronization): holding
	// mu across them would stall every other call behind a writer waiting
	// for it. Close waits for them before it tears the context down.
	blocking sync.WaitGroup

	smu     sync.Mutex // guards streams, pinned and spare
	streams map[*cudaStream]struct{}
	pinned  map[*byte]int // page-locked buffers by start
	// spare holds driver events closed by Event.Close, up to
	// maxSpareEvents, for Record to record again: a staged async write
	// records an event a call, and creating and destroying one are two
	// more driver calls each time.
	spare []uintptr
}

// maxSpareEvents is the most closed driver events a CUDA backend keeps.
const maxSpareEvents = 64

var _ Backend = (*CUDA)(nil)

// OpenCUDA loads the CUDA driver and opens a device. When no driver library
// loads (from the default names), the driver reports no device or is a stub
// library, or there are fewer devices than opt.Device+1, the error wraps
// ErrNoDevice. A library that loads but lacks a required symbol, an explicit
// library path that does not load, or any other driver failure is an error
// that does not. On a 32-bit platform, where NVIDIA ships no driver, the
// error wraps ErrNoDevice too.
func OpenCUDA(opt CUDAOptions) (*CUDA, error) {
	if unsafe.Sizeof(uintptr(0)) < 8 {
		// The driver's calls pass each argument, 64-bit ones included,
		// in one word (cuda_call.go).
		return nil, fmt.Errorf("device: cuda: the CUDA backend runs only on 64-bit platforms: %w", ErrNoDevice)
	}
	d, err := loadDriver(opt.Library)
	if err != nil {
		return nil, err
	}
	if r := d.cuInit(0); r != cuSuccess {
		return nil, d.error("cuInit", r)
	}
	var n int32
	if r := d.cuDeviceGetCount(&n); r != cuSuccess {
		return nil, d.error("cuDeviceGetCount", r)
	}
	if opt.Device < 0 || opt.Device >= int(n) {
		return nil, fmt.Errorf("device: cuda: device %d requested, %d present (%s): %w", opt.Device, n, d.path, ErrNoDevice)
	}
	c := &CUDA{d: d, ord: int32(opt.Device), library: d.path}
	if r := d.cuDeviceGet(&c.dev, c.ord); r != cuSuccess {
		return nil, d.error("cuDeviceGet", r)
	}
	var name [256]byte
	if r := d.cuDeviceGetName(&name[0], int32(len(name)), c.dev); r != cuSuccess {
		return nil, d.error("cuDeviceGetName", r)
	}
	c.name = cString(name[:])
	if r := d.cuDevicePrimaryCtxRetain(&c.ctx, c.dev); r != cuSuccess {
		return nil, d.error("cuDevicePrimaryCtxRetain", r)
	}
	return c, nil
}

// Name returns "cuda".
func (c *CUDA) Name() string { return "cuda" }

// DeviceName is the device's name as the driver reports it.
func (c *CUDA) DeviceName() string { return c.name }

// Library is the path or name of the driver library the backend loaded.
func (c *CUDA) Library() string { return c.library }

// UUID returns the device's UUID in the form NVML and nvidia-smi print
// ("GPU-" and 32 hex digits in groups). The driver entry point is optional:
// where the library lacks it, the error wraps errors.ErrUnsupported.
func (c *CUDA) UUID() (string, error) {
	if c.d.cuDeviceGetUuid == nil {
		return "", fmt.Errorf("device: cuda: %s has neither cuDeviceGetUuid_v2 nor cuDeviceGetUuid: %w", c.d.path, errors.ErrUnsupported)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return "", ErrClosed
	}
	var u [16]byte
	if r := c.d.cuDeviceGetUuid(&u, c.dev); r != cuSuccess {
		return "", c.d.error(c.d.uuidName, r)
	}
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// enter locks the goroutine to its OS thread and makes the primary context
// current there; exit undoes the lock. Every driver call that needs a
// context runs between them.
func (c *CUDA) enter() error {
	runtime.LockOSThread()
	if r := c.d.ctxSetCurrent(c.ctx); r != cuSuccess {
		runtime.UnlockOSThread()
		return c.d.error("cuCtxSetCurrent", r)
	}
	return nil
}

func (c *CUDA) exit() { runtime.UnlockOSThread() }

// Alloc allocates bytes bytes of device memory and zeroes them (so the
// backend is a device.AllocZeroer). The driver's calls run without c.mu.
func (c *CUDA) Alloc(bytes int) (Ptr, error) {
	if bytes <= 0 {
		return 0, fmt.Errorf("device: cuda alloc of %d bytes: %w", bytes, ErrInvalidSize)
	}
	var p uint64
	err := c.callBlocking(func() error {
		if r := c.d.cuMemAlloc(&p, uint64(bytes)); r != cuSuccess {
			return fmt.Errorf("device: cuda alloc of %d bytes: %w", bytes, c.d.error("cuMemAlloc_v2", r))
		}
		if r := c.d.memsetD8(p, 0, uint64(bytes)); r != cuSuccess {
			err := fmt.Errorf("device: cuda alloc of %d bytes: zeroing: %w", bytes, c.d.error("cuMemsetD8_v2", r))
			if r := c.d.cuMemFree(p); r != cuSuccess {
				err = errors.Join(err, c.d.error("cuMemFree_v2", r))
			}
			return err
		}
		// Inserted before the call counts as over, so that Close, which
		// waits for it, frees this allocation too.
		c.mu.Lock()
		c.allocs.insert(region{base: Ptr(p), size: uint64(bytes)})
		c.mu.Unlock()
		return nil
	})
	if err != nil {
		return 0, err
	}
	return Ptr(p), nil
}

// AllocZeroes reports that the CUDA backend's Alloc returns zeroed memory:
// it zeroes every allocation on the device, so a store need not again.
func (c *CUDA) AllocZeroes() bool { return true }

// Free frees memory that Alloc returned. When the driver refuses, the
// allocation stays live. The allocation leaves the table first, so calls
// that name it fail while cuMemFree runs, without c.mu (the driver may
// wait for work on the device there).
func (c *CUDA) Free(p Ptr) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	r, err := c.allocs.remove(p)
	if err != nil {
		c.mu.Unlock()
		return fmt.Errorf("device: cuda free: %w", err)
	}
	c.blocking.Add(1)
	c.mu.Unlock()
	defer c.blocking.Done()
	err = c.enter()
	if err == nil {
		if res := c.d.cuMemFree(uint64(p)); res != cuSuccess {
			err = fmt.Errorf("device: cuda free %#x: %w", uint64(p), c.d.error("cuMemFree_v2", res))
		}
		c.exit()
	}
	if err != nil {
		c.mu.Lock()
		c.allocs.insert(r)
		c.mu.Unlock()
	}
	return err
}

// callBlocking runs f, driver calls that may wait for the device, with
// the context current and c.mu not held: other calls go on meanwhile.
// Close waits for it to return.
func (c *CUDA) callBlocking(f func() error) error {
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return ErrClosed
	}
	c.blocking.Add(1)
	c.mu.RUnlock()
	defer c.blocking.Done()
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	return f()
}

// check verifies that the n bytes at p lie in a live allocation. The caller
// holds c.mu for reading.
func (c *CUDA) check(p Ptr, n int) error {
	if c.closed {
		return ErrClosed
	}
	_, _, err := c.allocs.find(p, n)
	return err
}

// CopyHtoD copies src to device memory at dst.
func (c *CUDA) CopyHtoD(dst Ptr, src []byte) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if err := c.check(dst, len(src)); err != nil {
		return fmt.Errorf("device: cuda copy to device: %w", err)
	}
	if len(src) == 0 {
		return nil
	}
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	if r := c.d.memcpyHtoD(uint64(dst), unsafe.Pointer(unsafe.SliceData(src)), uint64(len(src))); r != cuSuccess {
		return fmt.Errorf("device: cuda copy of %d bytes to %#x: %w", len(src), uint64(dst), c.d.error("cuMemcpyHtoD_v2", r))
	}
	return nil
}

// CopyDtoH copies len(dst) bytes of device memory at src to dst.
func (c *CUDA) CopyDtoH(dst []byte, src Ptr) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if err := c.check(src, len(dst)); err != nil {
		return fmt.Errorf("device: cuda copy to host: %w", err)
	}
	if len(dst) == 0 {
		return nil
	}
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	if r := c.d.memcpyDtoH(unsafe.Pointer(unsafe.SliceData(dst)), uint64(src), uint64(len(dst))); r != cuSuccess {
		return fmt.Errorf("device: cuda copy of %d bytes from %#x: %w", len(dst), uint64(src), c.d.error("cuMemcpyDtoH_v2", r))
	}
	return nil
}

// CopyDtoD copies bytes bytes between device allocations.
func (c *CUDA) CopyDtoD(dst, src Ptr, bytes int) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if err := c.check(src, bytes); err != nil {
		return fmt.Errorf("device: cuda copy from %#x: %w", uint64(src), err)
	}
	if err := c.check(dst, bytes); err != nil {
		return fmt.Errorf("device: cuda copy to %#x: %w", uint64(dst), err)
	}
	if bytes == 0 {
		return nil
	}
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	if r := c.d.memcpyDtoD(uint64(dst), uint64(src), uint64(bytes)); r != cuSuccess {
		return fmt.Errorf("device: cuda copy of %d bytes from %#x to %#x: %w", bytes, uint64(src), uint64(dst), c.d.error("cuMemcpyDtoD_v2", r))
	}
	return nil
}

// Memset sets bytes bytes of device memory at dst to value.
func (c *CUDA) Memset(dst Ptr, value byte, bytes int) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if err := c.check(dst, bytes); err != nil {
		return fmt.Errorf("device: cuda memset: %w", err)
	}
	if bytes == 0 {
		return nil
	}
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	if r := c.d.memsetD8(uint64(dst), value, uint64(bytes)); r != cuSuccess {
		return fmt.Errorf("device: cuda memset of %d bytes at %#x: %w", bytes, uint64(dst), c.d.error("cuMemsetD8_v2", r))
	}
	return nil
}

// Sync waits for the device to finish all work issued in the context.
func (c *CUDA) Sync() error {
	return c.callBlocking(func() error {
		if r := c.d.ctxSynchronize(); r != cuSuccess {
			return c.d.error("cuCtxSynchronize", r)
		}
		return nil
	})
}

// MemInfo reports the device's free and total memory as the driver sees
// them (all processes together).
func (c *CUDA) MemInfo() (free, total uint64, err error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return 0, 0, ErrClosed
	}
	if err := c.enter(); err != nil {
		return 0, 0, err
	}
	defer c.exit()
	if r := c.d.cuMemGetInfo(&free, &total); r != cuSuccess {
		return 0, 0, c.d.error("cuMemGetInfo_v2", r)
	}
	return free, total, nil
}

// Close waits for and destroys every live stream, frees every page-locked
// buffer and allocation still live, and releases the primary
// context. Every later call, Close included, fails with ErrClosed. The
// driver library stays loaded: it is shared by every CUDA backend of the
// process and is never unloaded.
func (c *CUDA) Close() error {
	serr := c.closeStreams()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.closed = true
	c.mu.Unlock()
	c.blocking.Wait() // no call starts now: they see closed
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	errs := []error{serr}
	c.smu.Lock()
	for p := range c.pinned {
		if r := c.d.async.cuMemFreeHost(unsafe.Pointer(p)); r != cuSuccess {
			errs = append(errs, c.d.error("cuMemFreeHost", r))
		}
	}
	c.pinned = nil
	for _, h := range c.spare {
		if r := c.d.async.eventDestroy(h); r != cuSuccess {
			errs = append(errs, c.d.error("cuEventDestroy_v2", r))
		}
	}
	c.spare = nil
	c.smu.Unlock()
	for _, r := range c.allocs.clear() {
		if res := c.d.cuMemFree(uint64(r.base)); res != cuSuccess {
			errs = append(errs, fmt.Errorf("device: cuda close: free %#x: %w", uint64(r.base), c.d.error("cuMemFree_v2", res)))
		}
	}
	if r := c.d.ctxSetCurrent(0); r != cuSuccess {
		errs = append(errs, c.d.error("cuCtxSetCurrent", r))
	}
	if r := c.d.cuDevicePrimaryCtxRelease(c.dev); r != cuSuccess {
		errs = append(errs, c.d.error("cuDevicePrimaryCtxRelease_v2", r))
	}
	return errors.Join(errs...)
}

// driver holds the entry points of one loaded driver library. The fields are
// set once by loadDriver; optional entry points are nil when the library
// lacks them. Those called rarely are functions made by
// purego.RegisterFunc; those called per operation are procs, called
// through the typed methods of cuda_call.go.
type driver struct {
	path     string
	uuidName string // the symbol cuDeviceGetUuid was bound to

	cuInit                    func(flags uint32) cuResult
	cuGetErrorName            func(r cuResult, name **byte) cuResult // optional
	cuDeviceGetCount          func(n *int32) cuResult
	cuDeviceGet               func(dev *int32, ordinal int32) cuResult
	cuDeviceGetName           func(name *byte, n int32, dev int32) cuResult
	cuDeviceGetUuid           func(uuid *[16]byte, dev int32) cuResult // optional
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) cuResult
	cuDevicePrimaryCtxRelease func(dev int32) cuResult
	cuMemAlloc                func(p *uint64, n uint64) cuResult
	cuMemFree                 func(p uint64) cuResult
	cuMemGetInfo              func(free, total *uint64) cuResult

	cuCtxSetCurrent  proc
	cuCtxSynchronize proc
	cuMemcpyHtoD     proc
	cuMemcpyDtoH     proc
	cuMemcpyDtoD     proc
	cuMemsetD8       proc

	async asyncDriver // streams, events, async copies and kernels (optional)
}

var registerFunc = purego.RegisterFunc

var (
	driversMu sync.Mutex
	drivers   = map[string]*driver{} // loaded libraries by the name asked for
)

// loadDriver loads the driver library named by library, $GPUSTATE_LIBCUDA,
// or the default names, and binds its entry points. A library is loaded once
// per process and never unloaded.
func loadDriver(library string) (*driver, error) {
	names := []string{library}
	explicit := true
	if library == "" {
		if env := os.Getenv(EnvLibCUDA); env != "" {
			names = []string{env}
		} else {
			names = []string{"libcuda.so.1", "libcuda.so"}
			explicit = false
		}
	}
	driversMu.Lock()
	defer driversMu.Unlock()
	var errs []error
	for _, name := range names {
		if d := drivers[name]; d != nil {
			return d, nil
		}
		h, err := dlopen(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d, err := bind(h, name)
		if err != nil {
			purego.Dlclose(h) // nothing bound from it is kept
			return nil, err
		}
		drivers[name] = d
		return d, nil
	}
	err := fmt.Errorf("device: cuda: no driver library: %w", errors.Join(errs...))
	if !explicit {
		err = fmt.Errorf("%w (%w)", err, ErrNoDevice)
	}
	return nil, err
}

// dlopen loads a library. The goroutine stays on one OS thread from dlopen
// to dlerror, since the error message is per thread; the handle, not the
// message, says whether the load failed.
func dlopen(name string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := purego.Dlopen(name, purego.RTLD_LAZY|purego.RTLD_LOCAL)
	if h == 0 {
		if err == nil {
			err = errors.New("not loaded")
		}
		if strings.Contains(err.Error(), name) {
			return 0, err // dlerror names the path already
		}
		return 0, fmt.Errorf("%s: %v", name, err)
	}
	return h, nil
}

// dlsym returns the address of symbol name, or 0 when the library has none.
func dlsym(h uintptr, name string) uintptr {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p, _ := purego.Dlsym(h, name)
	return p
}

// bind resolves the driver's entry points in the library with handle h.
// A missing required symbol is an error naming it; purego.RegisterFunc only
// ever sees addresses that exist.
func bind(h uintptr, path string) (*driver, error) {
	d := &driver{path: path}
	// Each entry point is bound to the first of its names the library has.
	required := []struct {
		name string
		fn   any
	}{
		{"cuInit", &d.cuInit},
		{"cuDeviceGetCount", &d.cuDeviceGetCount},
		{"cuDeviceGet", &d.cuDeviceGet},
		{"cuDeviceGetName", &d.cuDeviceGetName},
		{"cuDevicePrimaryCtxRetain", &d.cuDevicePrimaryCtxRetain},
		{"cuDevicePrimaryCtxRelease_v2 cuDevicePrimaryCtxRelease", &d.cuDevicePrimaryCtxRelease},
		{"cuCtxSetCurrent", &d.cuCtxSetCurrent},
		{"cuCtxSynchronize", &d.cuCtxSynchronize},
		{"cuMemAlloc_v2", &d.cuMemAlloc},
		{"cuMemFree_v2", &d.cuMemFree},
		{"cuMemcpyHtoD_v2", &d.cuMemcpyHtoD},
		{"cuMemcpyDtoH_v2", &d.cuMemcpyDtoH},
		{"cuMemcpyDtoD_v2", &d.cuMemcpyDtoD},
		{"cuMemsetD8_v2", &d.cuMemsetD8},
		{"cuMemGetInfo_v2", &d.cuMemGetInfo},
	}
	var missing []string
	for _, s := range required {
		names := strings.Fields(s.name)
		var p uintptr
		for _, name := range names {
			if p = dlsym(h, name); p != 0 {
				break
			}
		}
		if p == 0 {
			missing = append(missing, names[0])
			continue
		}
		bindEntry(s.fn, p)
	}
	if missing != nil {
		return nil, fmt.Errorf("device: cuda: %s lacks required symbols %v", path, missing)
	}
	bindAsync(h, &d.async)
	if p := dlsym(h, "cuGetErrorName"); p != 0 {
		purego.RegisterFunc(&d.cuGetErrorName, p)
	}
	for _, name := range []string{"cuDeviceGetUuid_v2", "cuDeviceGetUuid"} {
		if p := dlsym(h, name); p != 0 {
			purego.RegisterFunc(&d.cuDeviceGetUuid, p)
			d.uuidName = name
			break
		}
	}
	return d, nil
}

// bindEntry points fn, a *proc or a pointer to a function variable, at
// the entry point at p.
func bindEntry(fn any, p uintptr) {
	if pp, ok := fn.(*proc); ok {
		*pp = proc(p)
		return
	}
	registerFunc(fn, p)
}

// error turns a driver result into a *CUDAError for the call fn.
func (d *driver) error(fn string, r cuResult) error {
	name := errorNames[r]
	if name == "" && d.cuGetErrorName != nil {
		var s *byte
		if d.cuGetErrorName(r, &s) == cuSuccess && s != nil {
			name = goString(s)
		}
	}
	if name == "" {
		name = "CUDA_ERROR_UNKNOWN_CODE"
	}
	return &CUDAError{Func: fn, Code: int(r), Name: name, Library: d.path}
}

// goString copies the NUL-terminated C string at s.
func goString(s *byte) string {
	n := 0
	for n < 256 && *(*byte)(unsafe.Add(unsafe.Pointer(s), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(s, n))
}

// cString returns the text of b up to its first NUL.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// openCUDA opens the CUDA backend with the default options, for Open.
func openCUDA() (Backend, error) {
	c, err := OpenCUDA(CUDAOptions{})
	if err != nil {
		return nil, err
	}
	return c, nil
}
