//go:build linux

package device

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"unsafe"
)

// The benchmarks measure each backend's Alloc, copies and Memset against a
// plain copy of the same bytes between two Go slices (memmove), and, for
// CUDA, against the same driver entry points called directly. Every figure
// is bytes per second (SetBytes), so ratios read straight off one run:
//
//	go test -run '^$' -bench . ./runtime/device
//
// The CUDA backend runs on the fake driver (cuda-fake: host memory, so its
// figures show the cost of the call path) unless GPUSTATE_BACKEND=cuda,
// which benchmarks the machine's GPU (cuda) instead.

// benchSizes are the copy sizes: a small block, a slab, and on a real GPU a
// size large enough that launch and sync costs vanish next to HBM time.
var benchSizes = []int{64 << 10, 16 << 20}

func BenchmarkDevice(b *testing.B) {
	if os.Getenv(EnvBackend) == "cuda" {
		benchSizes = []int{64 << 10, 16 << 20, 256 << 20}
	}
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("memmove/%s", sizeName(size)), func(b *testing.B) {
			src, dst := make([]byte, size), make([]byte, size)
			fill(src, 1)
			copy(dst, src) // fault the pages in before timing
			b.SetBytes(int64(size))
			for b.Loop() {
				copy(dst, src)
			}
		})
	}
	benchBackend(b, "host", func(b *testing.B) Backend { return Host() })
	name, open := benchCUDA(b)
	benchBackend(b, name, func(b *testing.B) Backend { return open(b) })
	benchDriver(b, open)
}

// benchCUDA returns the CUDA backend to benchmark: the machine's with
// GPUSTATE_BACKEND=cuda, else one on the fake driver.
func benchCUDA(b *testing.B) (string, func(b *testing.B) *CUDA) {
	if os.Getenv(EnvBackend) == "cuda" {
		return "cuda", func(b *testing.B) *CUDA {
			c, err := OpenCUDA(CUDAOptions{})
			if err != nil {
				b.Fatalf("GPUSTATE_BACKEND=cuda: %v", err)
			}
			return c
		}
	}
	return "cuda-fake", func(b *testing.B) *CUDA {
		f := fakeDriver(b)
		f.must(b, "total", 4<<30)
		c, err := OpenCUDA(CUDAOptions{Library: f.path})
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
}

func benchBackend(b *testing.B, name string, open func(b *testing.B) Backend) {
	for _, size := range benchSizes {
		sz := sizeName(size)
		run := func(op string, body func(b *testing.B, be Backend, src, dst Ptr, host []byte)) {
			b.Run(fmt.Sprintf("%s/%s/%s", name, op, sz), func(b *testing.B) {
				be := open(b)
				defer be.Close()
				src, err := be.Alloc(size)
				if err != nil {
					b.Fatal(err)
				}
				dst, err := be.Alloc(size)
				if err != nil {
					b.Fatal(err)
				}
				host := make([]byte, size)
				warm(b, be, src, dst, host)
				b.SetBytes(int64(size))
				for b.Loop() {
					body(b, be, src, dst, host)
				}
				if err := be.Sync(); err != nil {
					b.Fatal(err)
				}
			})
		}
		run("Alloc", func(b *testing.B, be Backend, _, _ Ptr, _ []byte) {
			p, err := be.Alloc(size)
			if err != nil {
				b.Fatal(err)
			}
			if err := be.Free(p); err != nil {
				b.Fatal(err)
			}
		})
		run("HtoD", func(b *testing.B, be Backend, _, dst Ptr, host []byte) {
			if err := be.CopyHtoD(dst, host); err != nil {
				b.Fatal(err)
			}
		})
		run("DtoH", func(b *testing.B, be Backend, src, _ Ptr, host []byte) {
			if err := be.CopyDtoH(host, src); err != nil {
				b.Fatal(err)
			}
		})
		run("DtoD", func(b *testing.B, be Backend, src, dst Ptr, _ []byte) {
			if err := be.CopyDtoD(dst, src, size); err != nil {
				b.Fatal(err)
			}
			if err := be.Sync(); err != nil {
				b.Fatal(err)
			}
		})
		run("Memset", func(b *testing.B, be Backend, _, dst Ptr, _ []byte) {
			if err := be.Memset(dst, 0x5a, size); err != nil {
				b.Fatal(err)
			}
			if err := be.Sync(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// benchDriver calls the driver's entry points directly, on one thread with
// the context made current once: the floor under the CUDA backend's figures.
func benchDriver(b *testing.B, open func(b *testing.B) *CUDA) {
	for _, size := range benchSizes {
		run := func(op string, body func(d *driver, src, dst uint64, host []byte) cuResult) {
			b.Run(fmt.Sprintf("driver/%s/%s", op, sizeName(size)), func(b *testing.B) {
				c := open(b)
				defer c.Close()
				src, err := c.Alloc(size)
				if err != nil {
					b.Fatal(err)
				}
				dst, err := c.Alloc(size)
				if err != nil {
					b.Fatal(err)
				}
				host := make([]byte, size)
				warm(b, c, src, dst, host)
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				if r := c.d.cuCtxSetCurrent(c.ctx); r != cuSuccess {
					b.Fatal(c.d.error("cuCtxSetCurrent", r))
				}
				b.SetBytes(int64(size))
				for b.Loop() {
					if r := body(c.d, uint64(src), uint64(dst), host); r != cuSuccess {
						b.Fatal(c.d.error(op, r))
					}
				}
			})
		}
		run("HtoD", func(d *driver, _, dst uint64, host []byte) cuResult {
			return d.cuMemcpyHtoD(dst, unsafe.Pointer(&host[0]), uint64(len(host)))
		})
		run("DtoH", func(d *driver, src, _ uint64, host []byte) cuResult {
			return d.cuMemcpyDtoH(unsafe.Pointer(&host[0]), src, uint64(len(host)))
		})
		run("DtoD", func(d *driver, src, dst uint64, host []byte) cuResult {
			if r := d.cuMemcpyDtoD(dst, src, uint64(len(host))); r != cuSuccess {
				return r
			}
			return d.cuCtxSynchronize()
		})
		run("Memset", func(d *driver, _, dst uint64, host []byte) cuResult {
			if r := d.cuMemsetD8(dst, 0x5a, uint64(len(host))); r != cuSuccess {
				return r
			}
			return d.cuCtxSynchronize()
		})
	}
}

// warm touches every page the benchmark will use, so that first-touch
// page faults are not timed.
func warm(b *testing.B, be Backend, src, dst Ptr, host []byte) {
	fill(host, 1)
	if err := be.CopyHtoD(src, host); err != nil {
		b.Fatal(err)
	}
	if err := be.CopyHtoD(dst, host); err != nil {
		b.Fatal(err)
	}
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}
