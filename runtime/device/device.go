// Package device is the layer through which the state store touches device
// memory. A Backend allocates, copies and sets bytes; the host backend keeps
// them in memory mapped outside the Go heap, the CUDA backend in GPU memory
// through the CUDA driver API.
//
// Open picks a backend: CUDA where libcuda.so.1 loads and a device exists, else
// the host backend. GPUSTATE_BACKEND=host or GPUSTATE_BACKEND=cuda forces
// one; cuda with no usable GPU is an error, never a silent fallback.
//
// # Backends
//
// Host (and NewHost, which can cap the bytes handed out) maps memory with
// mmap; it never fails to open and works wherever the package builds.
//
// OpenCUDA (Linux only) loads the CUDA driver library at run time through
// github.com/ebitengine/purego: no cgo, no CUDA toolkit and no headers are
// needed to build it, and a CGO_ENABLED=0 build keeps it (such a binary is
// dynamically linked against the C library, through which purego loads the
// driver). It uses the
// device's primary context, made current on the calling OS thread for every
// call, and the _v2 entry points of the driver API. An out-of-memory answer
// from the driver is an error for which errors.Is(err, ErrOutOfMemory) holds;
// other driver failures are *CUDAError values naming the entry point and the
// CUresult.
//
// Both backends track their live allocations: a Ptr outside them, or a
// length that runs past the end of one, is an error wrapping ErrInvalidPtr,
// never a fault, and nothing reaches the driver unchecked. Both return
// zeroed memory from Alloc (a Backend in general need not). Both are safe
// for concurrent use.
//
// # Streams and kernels
//
// Both backends also implement the optional interfaces Streams (ordered
// queues of asynchronous work, events that mark points in them, async
// copies, page-locked staging memory from HostAlloc) and Kernels (modules
// loaded from PTX text, kernels launched on a stream). On the CUDA backend
// they are the driver's streams, events, cuMemcpy*Async_v2, cuMemHostAlloc,
// cuModuleLoadData and cuLaunchKernel, bound when present: a library without
// them still opens, and the first stream or module call answers an error
// naming the missing entry points. On the host backend each stream is an
// ordered queue run by its own goroutine, so queued work really completes
// later, and kernels are Go functions registered by name with
// RegisterHostKernel. Work that meets memory freed since it was queued fails
// its stream; the events recorded after it report the error.
//
// # Environment
//
//	GPUSTATE_BACKEND  host, cuda, or auto (the default): Open's choice
//	GPUSTATE_LIBCUDA  path of the driver library to load instead of
//	                  libcuda.so.1 and libcuda.so (tests point it at a fake)
//
// Open falls back to the host backend only when the CUDA backend fails with
// ErrNoDevice: no driver library found under the default names, the driver
// reports no device, or the library is the toolkit's stub. A library that
// loads but lacks an entry point, or a GPUSTATE_LIBCUDA path that does not
// load, is an error: a broken setup is not mistaken for a machine without
// a GPU.
//
// # Testing
//
// The CUDA backend's tests need no GPU: they build testdata/fakecuda.c, a
// driver library with the same entry points over host memory and with
// injectable failures, with gcc, and load it through CUDAOptions.Library or
// GPUSTATE_LIBCUDA. With GPUSTATE_BACKEND=cuda the same checks also run on
// the machine's driver; scripts/gpu-check.sh (make gpu-check) does that and
// prints the device's copy bandwidths.
//
// # Telemetry
//
// The device's own memory figures (total, used, free, and this process's
// share) come from NVML in package
// github.com/gpustate/gpustate/runtime/device/nvml, kept apart because it
// needs cgo; without cgo, or off Linux, that package reports NVML as
// unavailable. This package never links NVML.
package device

import "errors"

// Ptr is an address in a backend's memory. A Ptr returned by Alloc plus an
// offset inside that allocation is also a valid Ptr.
type Ptr uint64

// Span locates Rows consecutive rows of one column that live in one block,
// starting at Ptr.
type Span struct {
	Ptr  Ptr
	Rows int
}

// Backend is the extension point for device memory: the state store touches
// memory only through it, and users may plug in their own allocator.
type Backend interface {
	// Name names the backend ("host", "cuda").
	Name() string
	// Alloc returns bytes bytes of device memory. Out of memory is an error
	// for which errors.Is(err, ErrOutOfMemory) holds.
	Alloc(bytes int) (Ptr, error)
	// Free gives back memory that Alloc returned.
	Free(p Ptr) error
	// CopyHtoD copies src from the host to dst.
	CopyHtoD(dst Ptr, src []byte) error
	// CopyDtoH copies len(dst) bytes from src to the host.
	CopyDtoH(dst []byte, src Ptr) error
	// CopyDtoD copies bytes bytes from src to dst, both device memory.
	CopyDtoD(dst, src Ptr, bytes int) error
	// Memset sets bytes bytes at dst to value.
	Memset(dst Ptr, value byte, bytes int) error
	// Sync waits until every operation issued so far has completed.
	Sync() error
	// MemInfo reports the device's free and total memory in bytes.
	MemInfo() (free, total uint64, err error)
	// Close releases the backend; later calls fail.
	Close() error
}

// ErrOutOfMemory is returned, wrapped, when a backend cannot allocate.
var ErrOutOfMemory = errors.New("device: out of memory")

// Errors the backends in this package return, wrapped with context.
var (
	// ErrInvalidPtr: a Ptr that is not inside a live allocation of the
	// backend, a range that runs past the end of its allocation, or a Free of
	// a Ptr that is not the start of a live allocation.
	ErrInvalidPtr = errors.New("device: invalid pointer")
	// ErrInvalidSize: a negative length, or an Alloc of zero or fewer bytes.
	ErrInvalidSize = errors.New("device: invalid size")
	// ErrClosed: a call on a backend after its Close.
	ErrClosed = errors.New("device: backend closed")
)
