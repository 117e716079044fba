//go:build linux

package device

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// The benchmarks time each backend's Alloc, copies and Memset side by side
// with baselines on the same bytes, alternating within every iteration, so
// that the ratios hold on a busy machine where absolute figures drift:
//
//	go test -run '^$' -bench . ./runtime/device
//
// Each reports the operation's own MB/s and ns/op and, per baseline, the
// median over iterations of baseline time / operation time:
//
//	x_memmove  against copy() of the same bytes between two Go slices
//	x_driver   (CUDA) against the same driver entry point called directly,
//	           without the backend's checks, locking and context switch
//
// Above 1 the operation is faster than its baseline. The CUDA backend runs
// on the fake driver (cuda-fake: host memory, so its figures show the cost
// of the call path) unless GPUSTATE_BACKEND=cuda, which benchmarks the
// machine's GPU (cuda) instead. DtoD and Memset include a Sync, so that
// they time the device's work rather than its queueing.

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
	benchBackend(b, "host", func(b *testing.B) (Backend, *CUDA) { return Host(), nil })
	name, open := benchCUDA(b)
	benchBackend(b, name, func(b *testing.B) (Backend, *CUDA) { c := open(b); return c, c })
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
		f.Must(b, "total", 4<<30)
		c, err := OpenCUDA(CUDAOptions{Library: f.Path})
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
}

// benchEnv is what one benchmark's operation and baselines work on: two
// device allocations and two host buffers of the same size, every page
// touched.
type benchEnv struct {
	be       Backend
	c        *CUDA // be as a CUDA backend, or nil
	src, dst Ptr
	host     []byte
	a, b     []byte // memmove baseline buffers
}

func benchBackend(b *testing.B, name string, open func(b *testing.B) (Backend, *CUDA)) {
	for _, size := range benchSizes {
		n := uint64(size)
		ops := []struct {
			name   string
			op     func(e *benchEnv) error
			driver func(e *benchEnv) cuResult // nil: no driver baseline
		}{
			{"Alloc", func(e *benchEnv) error {
				p, err := e.be.Alloc(size)
				if err != nil {
					return err
				}
				return e.be.Free(p)
			}, nil},
			{"HtoD", func(e *benchEnv) error { return e.be.CopyHtoD(e.dst, e.host) },
				func(e *benchEnv) cuResult {
					return e.c.d.memcpyHtoD(uint64(e.dst), unsafe.Pointer(&e.host[0]), n)
				}},
			{"DtoH", func(e *benchEnv) error { return e.be.CopyDtoH(e.host, e.src) },
				func(e *benchEnv) cuResult {
					return e.c.d.memcpyDtoH(unsafe.Pointer(&e.host[0]), uint64(e.src), n)
				}},
			{"DtoD", func(e *benchEnv) error {
				if err := e.be.CopyDtoD(e.dst, e.src, size); err != nil {
					return err
				}
				return e.be.Sync()
			}, func(e *benchEnv) cuResult {
				if r := e.c.d.memcpyDtoD(uint64(e.dst), uint64(e.src), n); r != cuSuccess {
					return r
				}
				return e.c.d.ctxSynchronize()
			}},
			{"Memset", func(e *benchEnv) error {
				if err := e.be.Memset(e.dst, 0x5a, size); err != nil {
					return err
				}
				return e.be.Sync()
			}, func(e *benchEnv) cuResult {
				if r := e.c.d.memsetD8(uint64(e.dst), 0x5a, n); r != cuSuccess {
					return r
				}
				return e.c.d.ctxSynchronize()
			}},
		}
		for _, o := range ops {
			b.Run(fmt.Sprintf("%s/%s/%s", name, o.name, sizeName(size)), func(b *testing.B) {
				be, c := open(b)
				defer be.Close()
				e := newBenchEnv(b, be, c, size)
				// The driver baseline runs on this thread with the primary
				// context current; the backend's own calls lock the same
				// thread again and set the same context.
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				baselines := []baseline{{"memmove", func() error { copy(e.b, e.a); return nil }}}
				if c != nil && o.driver != nil {
					if r := c.d.ctxSetCurrent(c.ctx); r != cuSuccess {
						b.Fatal(c.d.error("cuCtxSetCurrent", r))
					}
					baselines = append(baselines, baseline{"driver", func() error {
						if r := o.driver(e); r != cuSuccess {
							return c.d.error(o.name, r)
						}
						return nil
					}})
				}
				sideBySide(b, size, func() error { return o.op(e) }, baselines)
			})
		}
	}
}

func newBenchEnv(b *testing.B, be Backend, c *CUDA, size int) *benchEnv {
	e := &benchEnv{be: be, c: c, host: make([]byte, size), a: make([]byte, size), b: make([]byte, size)}
	var err error
	if e.src, err = be.Alloc(size); err != nil {
		b.Fatal(err)
	}
	if e.dst, err = be.Alloc(size); err != nil {
		b.Fatal(err)
	}
	// Touch every page, so that first-touch faults are not timed.
	fill(e.host, 1)
	fill(e.a, 2)
	copy(e.b, e.a)
	for _, p := range []Ptr{e.src, e.dst} {
		if err := be.CopyHtoD(p, e.host); err != nil {
			b.Fatal(err)
		}
	}
	if err := be.Sync(); err != nil {
		b.Fatal(err)
	}
	return e
}

// baseline is an operation the benchmarked one is compared with.
type baseline struct {
	name string
	run  func() error
}

// sideBySide runs op and each baseline once per iteration, alternating
// which goes first, and reports op's MB/s and ns/op and, per baseline, the
// median of baseline time / op time as x_NAME.
func sideBySide(b *testing.B, size int, op func() error, base []baseline) {
	ratios := make([][]float64, len(base))
	var total time.Duration
	runOp := func() time.Duration {
		t := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		return time.Since(t)
	}
	i := 0
	for b.Loop() {
		var d time.Duration
		if i%2 == 0 {
			d = runOp()
		}
		times := make([]time.Duration, len(base))
		for j, bl := range base {
			t := time.Now()
			if err := bl.run(); err != nil {
				b.Fatal(err)
			}
			times[j] = time.Since(t)
		}
		if i%2 == 1 {
			d = runOp()
		}
		i++
		total += d
		for j, t := range times {
			ratios[j] = append(ratios[j], float64(t)/float64(max(d, 1)))
		}
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(i), "ns/op")
	b.ReportMetric(float64(size)*float64(i)/total.Seconds()/1e6, "MB/s")
	for j, bl := range base {
		slices.Sort(ratios[j])
		b.ReportMetric(ratios[j][len(ratios[j])/2], "x_"+bl.name)
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// BenchmarkHostRowCopies is a one-row append's backend call on the host
// backend: CopiesHtoD of a 528-byte row's four columns, two 256-byte ones
// to neighbouring blocks of one 64 KiB slab and two 8-byte ones to a block
// of another, rows moving through 80 slabs as a state's do, against copy()
// of the same bytes into Go buffers laid out the same way. ratio is the
// batch's time over the copies' (docs/BENCHMARKS.md, "Serving paths").
func BenchmarkHostRowCopies(b *testing.B) {
	h := Host()
	defer h.Close()
	bc := h.(BatchCopier)
	const slabs, slabBytes = 80, 64 << 10
	var ptrs []Ptr
	mem := make([][]byte, slabs)
	for i := range slabs {
		p, err := h.Alloc(slabBytes)
		if err != nil {
			b.Fatal(err)
		}
		ptrs = append(ptrs, p)
		mem[i] = make([]byte, slabBytes)
	}
	src := make([]byte, 256)
	cs := make([]HostCopy, 4)
	// where row i goes: its wide blocks in slab w, at off; its narrow ones
	// in slab n, at noff
	at := func(i int) (w, off, n, noff int) {
		return i / 128 % 64, i % 128 * 512, 64 + i/4096%16, i % 4096 * 16
	}
	i, j := 0, 0
	batch := func() {
		w, off, n, noff := at(i)
		cs[0] = HostCopy{Dst: ptrs[w] + Ptr(off), Src: src}
		cs[1] = HostCopy{Dst: ptrs[w] + Ptr(off+256), Src: src}
		cs[2] = HostCopy{Dst: ptrs[n] + Ptr(noff), Src: src[:8]}
		cs[3] = HostCopy{Dst: ptrs[n] + Ptr(noff+8), Src: src[:8]}
		if err := bc.CopiesHtoD(cs); err != nil {
			b.Fatal(err)
		}
		i++
	}
	plain := func() {
		w, off, n, noff := at(j)
		copy(mem[w][off:], src)
		copy(mem[w][off+256:], src)
		copy(mem[n][noff:], src[:8])
		copy(mem[n][noff+8:], src[:8])
		j++
	}
	const per = 256
	var ratios []float64
	var tb, tp time.Duration
	for b.Loop() {
		start := time.Now()
		for range per {
			batch()
		}
		db := time.Since(start)
		start = time.Now()
		for range per {
			plain()
		}
		dp := time.Since(start)
		tb, tp = tb+db, tp+dp
		ratios = append(ratios, float64(db)/float64(dp))
	}
	slices.Sort(ratios)
	n := float64(len(ratios) * per)
	b.ReportMetric(float64(tb.Nanoseconds())/n, "ns/batch")
	b.ReportMetric(float64(tp.Nanoseconds())/n, "ns/copies")
	b.ReportMetric(ratios[len(ratios)/2], "ratio")
}
