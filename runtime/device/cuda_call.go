//go:build linux

package device

import (
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// proc is the address of a driver entry point that runs on every copy,
// memset, synchronization or stream operation. A function that
// purego.RegisterFunc makes goes through reflection and allocates on
// every call; a proc is called through purego.SyscallN without allocating.
//
// SyscallN is //go:uintptrescapes, so the compiler moves the slice of its
// variadic arguments to the heap at every call site; the call methods pass
// a slice of a pooled procArgs instead, which is there already. They are
// //go:uintptrescapes themselves: where a caller converts an
// unsafe.Pointer to uintptr in the argument list, the memory it points to
// is moved to the heap (where it does not move) and kept alive until the
// call returns, as for a system call (rule 4 of unsafe.Pointer). Every
// argument takes one word, 64-bit ones included: the driver is 64-bit
// only (OpenCUDA refuses a 32-bit platform).
type proc uintptr

// procArgs holds the arguments of one call, for SyscallN.
type procArgs [11]uintptr

// procArgsPool holds the procArgs between calls. Under the race detector
// it drops some at random, and calls then allocate.
var procArgsPool = sync.Pool{New: func() any { return new(procArgs) }}

// result makes a driver result of r, the C function's return register.
func result(r uintptr) cuResult { return cuResult(int32(r)) }

// call0 calls p with no arguments.
func (p proc) call0() cuResult {
	r, _, _ := purego.SyscallN(uintptr(p))
	return result(r)
}

// callArgs calls p with the first n arguments of a, then returns a to the
// pool.
func (p proc) callArgs(a *procArgs, n int) cuResult {
	r, _, _ := purego.SyscallN(uintptr(p), a[:n]...)
	procArgsPool.Put(a)
	return result(r)
}

// args returns a procArgs from the pool.
func args() *procArgs { return procArgsPool.Get().(*procArgs) }

// call1 calls p with one argument.
//
//go:uintptrescapes
func (p proc) call1(a1 uintptr) cuResult {
	a := args()
	a[0] = a1
	return p.callArgs(a, 1)
}

// call2 calls p with two arguments.
//
//go:uintptrescapes
func (p proc) call2(a1, a2 uintptr) cuResult {
	a := args()
	a[0], a[1] = a1, a2
	return p.callArgs(a, 2)
}

// call3 calls p with three arguments.
//
//go:uintptrescapes
func (p proc) call3(a1, a2, a3 uintptr) cuResult {
	a := args()
	a[0], a[1], a[2] = a1, a2, a3
	return p.callArgs(a, 3)
}

// call4 calls p with four arguments.
//
//go:uintptrescapes
func (p proc) call4(a1, a2, a3, a4 uintptr) cuResult {
	a := args()
	a[0], a[1], a[2], a[3] = a1, a2, a3, a4
	return p.callArgs(a, 4)
}

// call11 calls p with eleven arguments.
//
//go:uintptrescapes
func (p proc) call11(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11 uintptr) cuResult {
	a := args()
	*a = procArgs{a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11}
	return p.callArgs(a, 11)
}

// The driver's entry points called per operation, typed. The context
// must be current on the calling thread, as for any driver call.

// ctxSetCurrent calls cuCtxSetCurrent.
func (d *driver) ctxSetCurrent(ctx uintptr) cuResult { return d.cuCtxSetCurrent.call1(ctx) }

// ctxSynchronize calls cuCtxSynchronize.
func (d *driver) ctxSynchronize() cuResult { return d.cuCtxSynchronize.call0() }

// memcpyHtoD calls cuMemcpyHtoD_v2. It returns once src may be reused.
func (d *driver) memcpyHtoD(dst uint64, src unsafe.Pointer, n uint64) cuResult {
	return d.cuMemcpyHtoD.call3(uintptr(dst), uintptr(src), uintptr(n))
}

// memcpyDtoH calls cuMemcpyDtoH_v2. It returns once dst holds the bytes.
func (d *driver) memcpyDtoH(dst unsafe.Pointer, src uint64, n uint64) cuResult {
	return d.cuMemcpyDtoH.call3(uintptr(dst), uintptr(src), uintptr(n))
}

// memcpyDtoD calls cuMemcpyDtoD_v2.
func (d *driver) memcpyDtoD(dst, src uint64, n uint64) cuResult {
	return d.cuMemcpyDtoD.call3(uintptr(dst), uintptr(src), uintptr(n))
}

// memsetD8 calls cuMemsetD8_v2.
func (d *driver) memsetD8(dst uint64, value uint8, n uint64) cuResult {
	return d.cuMemsetD8.call3(uintptr(dst), uintptr(value), uintptr(n))
}

// streamSynchronize calls cuStreamSynchronize.
func (a *asyncDriver) streamSynchronize(s uintptr) cuResult {
	return a.cuStreamSynchronize.call1(s)
}

// eventCreate calls cuEventCreate.
func (a *asyncDriver) eventCreate(e *uintptr, flags uint32) cuResult {
	return a.cuEventCreate.call2(uintptr(unsafe.Pointer(e)), uintptr(flags))
}

// eventRecord calls cuEventRecord.
func (a *asyncDriver) eventRecord(e, s uintptr) cuResult { return a.cuEventRecord.call2(e, s) }

// eventQuery calls cuEventQuery.
func (a *asyncDriver) eventQuery(e uintptr) cuResult { return a.cuEventQuery.call1(e) }

// eventSynchronize calls cuEventSynchronize.
func (a *asyncDriver) eventSynchronize(e uintptr) cuResult {
	return a.cuEventSynchronize.call1(e)
}

// eventDestroy calls cuEventDestroy_v2.
func (a *asyncDriver) eventDestroy(e uintptr) cuResult { return a.cuEventDestroy.call1(e) }

// streamWaitEvent calls cuStreamWaitEvent.
func (a *asyncDriver) streamWaitEvent(s, e uintptr, flags uint32) cuResult {
	return a.cuStreamWaitEvent.call3(s, e, uintptr(flags))
}

// memcpyHtoDAsync calls cuMemcpyHtoDAsync_v2. The driver reads src until
// the copy runs on s: src is page-locked memory, from cuMemHostAlloc.
func (a *asyncDriver) memcpyHtoDAsync(dst uint64, src unsafe.Pointer, n uint64, s uintptr) cuResult {
	return a.cuMemcpyHtoDAsync.call4(uintptr(dst), uintptr(src), uintptr(n), s)
}

// memcpyDtoHAsync calls cuMemcpyDtoHAsync_v2. The driver writes dst when
// the copy runs on s: dst is page-locked memory, from cuMemHostAlloc.
func (a *asyncDriver) memcpyDtoHAsync(dst unsafe.Pointer, src uint64, n uint64, s uintptr) cuResult {
	return a.cuMemcpyDtoHAsync.call4(uintptr(dst), uintptr(src), uintptr(n), s)
}

// memcpyDtoDAsync calls cuMemcpyDtoDAsync_v2.
func (a *asyncDriver) memcpyDtoDAsync(dst, src uint64, n uint64, s uintptr) cuResult {
	return a.cuMemcpyDtoDAsync.call4(uintptr(dst), uintptr(src), uintptr(n), s)
}

// launchKernel calls cuLaunchKernel. The driver reads params and extra
// during the call.
func (a *asyncDriver) launchKernel(f uintptr, grid, block Dim3, shared uint32, s uintptr, params, extra unsafe.Pointer) cuResult {
	return a.cuLaunchKernel.call11(f,
		uintptr(grid.X), uintptr(grid.Y), uintptr(grid.Z),
		uintptr(block.X), uintptr(block.Y), uintptr(block.Z),
		uintptr(shared), s, uintptr(params), uintptr(extra))
}
