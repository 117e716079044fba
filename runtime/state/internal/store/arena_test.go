package store

import (
	"bytes"
	"fmt"
	"sort"
	"sync"
	"testing"
	"unsafe"

	"github.com/gpustate/gpustate/runtime/device"
)

// arenaBackend is a backend over one Go byte slice that hands out
// allocations back to back, so that neighbouring allocations have
// neighbouring addresses, and fails every copy that runs past the end of
// the allocation it starts in, as a real driver may.
type arenaBackend struct {
	mu     sync.Mutex
	mem    []byte
	next   int
	allocs []arenaAlloc // by offset
}

type arenaAlloc struct{ off, size int }

func newArena(size int) *arenaBackend { return &arenaBackend{mem: make([]byte, size)} }

func (a *arenaBackend) base() device.Ptr { return device.Ptr(uintptr(unsafe.Pointer(&a.mem[0]))) }

func (a *arenaBackend) Name() string { return "arena" }

func (a *arenaBackend) Alloc(n int) (device.Ptr, error) {
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

func (a *arenaBackend) Free(p device.Ptr) error { return nil }

// span returns the n bytes at p, which must lie in one allocation.
func (a *arenaBackend) span(p device.Ptr, n int) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	off := int(p - a.base())
	i := sort.Search(len(a.allocs), func(i int) bool { return a.allocs[i].off > off }) - 1
	if i < 0 || off+n > a.allocs[i].off+a.allocs[i].size {
		return nil, fmt.Errorf("arena: %d bytes at offset %d leave their allocation", n, off)
	}
	return a.mem[off : off+n], nil
}

func (a *arenaBackend) CopyHtoD(dst device.Ptr, src []byte) error {
	d, err := a.span(dst, len(src))
	if err != nil {
		return err
	}
	copy(d, src)
	return nil
}

func (a *arenaBackend) CopyDtoH(dst []byte, src device.Ptr) error {
	s, err := a.span(src, len(dst))
	if err != nil {
		return err
	}
	copy(dst, s)
	return nil
}

func (a *arenaBackend) CopyDtoD(dst, src device.Ptr, n int) error {
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

func (a *arenaBackend) Memset(dst device.Ptr, v byte, n int) error {
	d, err := a.span(dst, n)
	if err != nil {
		return err
	}
	for i := range d {
		d[i] = v
	}
	return nil
}

func (a *arenaBackend) Sync() error { return nil }

func (a *arenaBackend) MemInfo() (uint64, uint64, error) {
	return uint64(len(a.mem) - a.next), uint64(len(a.mem)), nil
}

func (a *arenaBackend) Close() error { return nil }

// Copies that span neighbouring blocks stop at the end of a slab, even
// when the next slab's first block follows it in memory.
func TestCopiesStayInSlabs(t *testing.T) {
	a := newArena(8 << 20)
	p, err := NewPool(a, PoolOptions{BlockBytes: 256})
	check(t, err)
	defer p.Close()
	l := &Layout{Type: "Row", Columns: []Column{{Name: "A", ElemSize: 8, Width: 4}}}
	h := must[*Head](t)(p.NewHead(l, "s"))
	defer h.Release()
	// Three slabs' worth, in uneven batches, so that copies cross slabs.
	var want []byte
	for i := 0; p.Stats().Slabs < 3; i++ {
		batch := bytes.Repeat([]byte{byte(i)}, 32*(1+i%300))
		check(t, h.Append([][]byte{batch}))
		want = append(want, batch...)
	}
	got := [][]byte{make([]byte, len(want))}
	check(t, h.Read(0, h.Len(), got))
	if !bytes.Equal(got[0], want) {
		t.Fatal("rows read across slabs differ")
	}
}
