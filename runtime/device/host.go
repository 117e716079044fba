package device

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"syscall"
	"unsafe"
)

// HostOptions configures a host backend made by NewHost.
type HostOptions struct {
	// MaxBytes caps the bytes the backend hands out at once (as requested,
	// not rounded up to pages); an Alloc past it fails with ErrOutOfMemory,
	// and MemInfo reports MaxBytes as the total. Zero means no cap beyond
	// what the operating system grants.
	MaxBytes int64
}

// Host returns a new host backend with no cap: the same as
// NewHost(HostOptions{}). It never fails. Each call returns an independent
// backend with its own allocations; closing one leaves every other usable.
func Host() Backend {
	return NewHost(HostOptions{})
}

// NewHost returns a host backend. Its memory is mapped from the operating
// system outside the Go heap, zeroed when allocated, so a Ptr stays valid
// until Free or Close whatever the garbage collector does. Every Ptr and
// length passed to it is checked against the live allocations: a Ptr that
// Alloc did not return (or that points past an allocation's end) is an error
// wrapping ErrInvalidPtr, never a fault. Alloc maps pages lazily, so large
// allocations cost little until they are touched. The backend is safe for
// concurrent use; copies run in parallel, and Free waits for the copies
// that use the memory it unmaps.
func NewHost(opt HostOptions) Backend {
	return &hostBackend{max: opt.MaxBytes}
}

type hostBackend struct {
	max int64 // cap on live bytes; 0 means none

	mu      sync.RWMutex // write-held to change allocs, read-held to use their memory
	allocs  table
	closed  bool
	streams map[*hostStream]struct{} // live streams, closed by Close
	// unmap is read-held by queued stream work while it runs and
	// write-held (before mu) by Free and Close, which unmap memory: a
	// running kernel never holds mu, so Alloc does not wait for kernels.
	unmap sync.RWMutex
}

var _ Backend = (*hostBackend)(nil)

var pageSize = uint64(syscall.Getpagesize())

func (h *hostBackend) Name() string { return "host" }

func (h *hostBackend) Alloc(bytes int) (Ptr, error) {
	if bytes <= 0 {
		return 0, fmt.Errorf("device: host alloc of %d bytes: %w", bytes, ErrInvalidSize)
	}
	if uint64(bytes) > math.MaxInt-pageSize {
		return 0, fmt.Errorf("device: host alloc of %d bytes: %w", bytes, ErrOutOfMemory)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return 0, ErrClosed
	}
	if h.max > 0 && h.allocs.bytes+uint64(bytes) > uint64(h.max) {
		return 0, fmt.Errorf("device: host alloc of %d bytes with %d of %d in use: %w",
			bytes, h.allocs.bytes, h.max, ErrOutOfMemory)
	}
	length := (uint64(bytes) + pageSize - 1) &^ (pageSize - 1)
	mem, err := syscall.Mmap(-1, 0, int(length), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		if errors.Is(err, syscall.ENOMEM) {
			return 0, fmt.Errorf("device: host alloc of %d bytes: mmap: %v: %w", bytes, err, ErrOutOfMemory)
		}
		return 0, fmt.Errorf("device: host alloc of %d bytes: mmap: %w", bytes, err)
	}
	p := Ptr(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
	h.allocs.insert(region{base: p, size: uint64(bytes), mem: mem})
	return p, nil
}

func (h *hostBackend) Free(p Ptr) error {
	h.unmap.Lock()
	defer h.unmap.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	r, err := h.allocs.remove(p)
	if err != nil {
		return fmt.Errorf("device: host free: %w", err)
	}
	if err := syscall.Munmap(r.mem); err != nil {
		return fmt.Errorf("device: host free %#x: munmap: %w", uint64(p), err)
	}
	return nil
}

// span returns the n bytes of host memory at p. The caller holds h.mu for
// reading while it uses them.
func (h *hostBackend) span(p Ptr, n int) ([]byte, error) {
	if h.closed {
		return nil, ErrClosed
	}
	r, off, err := h.allocs.find(p, n)
	if err != nil {
		return nil, err
	}
	return r.mem[off : off+uint64(n) : off+uint64(n)], nil
}

func (h *hostBackend) CopyHtoD(dst Ptr, src []byte) error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	d, err := h.span(dst, len(src))
	if err != nil {
		return fmt.Errorf("device: host copy to device: %w", err)
	}
	copy(d, src)
	return nil
}

func (h *hostBackend) CopyDtoH(dst []byte, src Ptr) error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	s, err := h.span(src, len(dst))
	if err != nil {
		return fmt.Errorf("device: host copy to host: %w", err)
	}
	copy(dst, s)
	return nil
}

func (h *hostBackend) CopyDtoD(dst, src Ptr, bytes int) error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	s, err := h.span(src, bytes)
	if err != nil {
		return fmt.Errorf("device: host copy from %#x: %w", uint64(src), err)
	}
	d, err := h.span(dst, bytes)
	if err != nil {
		return fmt.Errorf("device: host copy to %#x: %w", uint64(dst), err)
	}
	copy(d, s) // memmove: overlapping ranges are handled
	return nil
}

func (h *hostBackend) Memset(dst Ptr, value byte, bytes int) error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	d, err := h.span(dst, bytes)
	if err != nil {
		return fmt.Errorf("device: host memset: %w", err)
	}
	fill(d, value)
	return nil
}

// fill sets every byte of b to v: it doubles a filled prefix up to a 1 MiB
// chunk, then copies that chunk over the rest. Copies of 1 MiB and more take
// memmove's non-temporal path, which writes without first reading the
// destination into the cache.
func fill(b []byte, v byte) {
	if v == 0 {
		clear(b)
		return
	}
	if len(b) == 0 {
		return
	}
	const chunk = 1 << 20
	b[0] = v
	n := 1
	for ; n < len(b) && n < chunk; n *= 2 {
		copy(b[n:], b[:n])
	}
	for ; n < len(b); n += chunk {
		copy(b[n:], b[:chunk])
	}
}

func (h *hostBackend) Sync() error {
	h.mu.RLock()
	if h.closed {
		h.mu.RUnlock()
		return ErrClosed
	}
	streams := make([]*hostStream, 0, len(h.streams))
	for s := range h.streams {
		streams = append(streams, s)
	}
	h.mu.RUnlock()
	// As a device's synchronize does, wait for the work of every stream
	// too (not holding h.mu: their copies take it). A stream's own error
	// is its Sync's to answer.
	for _, s := range streams {
		s.Sync()
	}
	return nil
}

// MemInfo reports, with a cap, the cap as total and what is left of it as
// free; without one, the machine's physical memory and its free part.
func (h *hostBackend) MemInfo() (free, total uint64, err error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		return 0, 0, ErrClosed
	}
	if h.max > 0 {
		return uint64(h.max) - h.allocs.bytes, uint64(h.max), nil
	}
	free, total, err = physicalMemory()
	if err != nil {
		return 0, 0, fmt.Errorf("device: host meminfo: %w", err)
	}
	return free, total, nil
}

// Close waits for and closes every live stream, then unmaps every allocation still live; every later call, Close
// included, fails with ErrClosed.
func (h *hostBackend) Close() error {
	h.mu.Lock()
	streams := make([]*hostStream, 0, len(h.streams))
	for s := range h.streams {
		streams = append(streams, s)
	}
	h.mu.Unlock()
	for _, s := range streams {
		s.Close() // its error belonged to its work; the backend closes regardless
	}
	h.unmap.Lock()
	defer h.unmap.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	h.closed = true
	var errs []error
	for _, r := range h.allocs.clear() {
		if r.mapped {
			continue // a caller may still copy there (HostBytes)
		}
		if err := syscall.Munmap(r.mem); err != nil {
			errs = append(errs, fmt.Errorf("device: host close: munmap %#x: %w", uint64(r.base), err))
		}
	}
	return errors.Join(errs...)
}
