package statetest

import (
	"fmt"
	"sort"
	"sync"
	"unsafe"

	"github.com/gpustate/gpustate/runtime/device"
)

// Arena is a backend over one Go byte slice that hands out allocations
// back to back, so that neighbouring allocations have neighbouring
// addresses, and fails every copy or memset that runs past the end of the
// allocation it starts in, as a real driver may. Free gives nothing back:
// an arena's room is what NewArena gave it. Tests run on it to check that
// the store never merges the copies of blocks that merely lie side by side
// in memory (the host backend's allocations never do).
type Arena struct {
	mu     sync.Mutex
	mem    []byte
	next   int
	allocs []arenaAlloc // by offset
}

type arenaAlloc struct{ off, size int }

// NewArena returns an arena of size bytes.
func NewArena(size int) *Arena { return &Arena{mem: make([]byte, size)} }

func (a *Arena) base() device.Ptr { return device.Ptr(uintptr(unsafe.Pointer(&a.mem[0]))) }

func (a *Arena) Name() string { return "arena" }

func (a *Arena) Alloc(n int) (device.Ptr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n <= 0 || a.next+n > len(a.mem) {
		return 0, fmt.Errorf("arena: %d bytes: %w", n, device.ErrOutOfMemory)
	}
	off := a.next
	a.next += n
	a.allocs = append(a.allocs, arenaAlloc{off, n})
	return a.base() + device.Ptr(off), nil
}

func (a *Arena) Free(p device.Ptr) error { return nil }

// span returns the n bytes at p, which must lie in one allocation.
func (a *Arena) span(p device.Ptr, n int) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	off := int(p - a.base())
	i := sort.Search(len(a.allocs), func(i int) bool { return a.allocs[i].off > off }) - 1
	if i < 0 || off+n > a.allocs[i].off+a.allocs[i].size {
		return nil, fmt.Errorf("arena: %d bytes at offset %d leave their allocation", n, off)
	}
	return a.mem[off : off+n], nil
}

func (a *Arena) CopyHtoD(dst device.Ptr, src []byte) error {
	d, err := a.span(dst, len(src))
	if err != nil {
		return err
	}
	copy(d, src)
	return nil
}

func (a *Arena) CopyDtoH(dst []byte, src device.Ptr) error {
	s, err := a.span(src, len(dst))
	if err != nil {
		return err
	}
	copy(dst, s)
	return nil
}

func (a *Arena) CopyDtoD(dst, src device.Ptr, n int) error {
	s, err := a.span(src, n)
	if err != nil {
		return err
	}
	d, err := a.span(dst, n)
	if err != nil {
		return err
	}
	copy(d, s)
	return nil
}

func (a *Arena) Memset(dst device.Ptr, v byte, n int) error {
	d, err := a.span(dst, n)
	if err != nil {
		return err
	}
	for i := range d {
		d[i] = v
	}
	return nil
}

func (a *Arena) Sync() error { return nil }

// MemInfo reports the bytes not handed out yet as free.
func (a *Arena) MemInfo() (uint64, uint64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return uint64(len(a.mem) - a.next), uint64(len(a.mem)), nil
}

func (a *Arena) Close() error { return nil }
