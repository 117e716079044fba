package device

import (
	"errors"
	"sync"
	"testing"
)

func TestHost(t *testing.T) {
	testBackend(t, func(t *testing.T) Backend { return Host() })
}

func TestHostName(t *testing.T) {
	if got := Host().Name(); got != "host" {
		t.Fatalf("Name() = %q, want host", got)
	}
}

func TestHostIndependent(t *testing.T) {
	a, b := Host(), Host()
	p := mustAlloc(t, a, 64)
	q := mustAlloc(t, b, 64)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.CopyHtoD(q, []byte{1}); err != nil {
		t.Fatalf("closing one host backend broke another: %v", err)
	}
	if err := b.CopyHtoD(p, []byte{1}); !errors.Is(err, ErrInvalidPtr) {
		t.Fatalf("another host backend's Ptr: got %v, want ErrInvalidPtr", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestHostMaxBytes(t *testing.T) {
	b := NewHost(HostOptions{MaxBytes: 10000})
	defer b.Close()
	p := mustAlloc(t, b, 6000)
	if _, err := b.Alloc(5000); !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("Alloc past MaxBytes: got %v, want ErrOutOfMemory", err)
	}
	free, total, err := b.MemInfo()
	if err != nil || free != 4000 || total != 10000 {
		t.Fatalf("MemInfo = %d, %d, %v; want 4000, 10000, nil", free, total, err)
	}
	if err := b.Free(p); err != nil {
		t.Fatal(err)
	}
	mustAlloc(t, b, 10000)
}

func TestHostHugeAlloc(t *testing.T) {
	b := Host()
	defer b.Close()
	// More than any machine has: the system refuses it, as out of memory.
	if _, err := b.Alloc(1 << 62); !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("Alloc(1<<62): got %v, want ErrOutOfMemory", err)
	}
	if _, err := b.Alloc(int(^uint(0) >> 1)); !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("Alloc(MaxInt): got %v, want ErrOutOfMemory", err)
	}
	// A large allocation is cheap until touched.
	p := mustAlloc(t, b, 1<<30)
	if err := b.Memset(p+(1<<30)-4096, 7, 4096); err != nil {
		t.Fatal(err)
	}
	if err := b.Free(p); err != nil {
		t.Fatal(err)
	}
}

func TestHostFreeWaitsForCopies(t *testing.T) {
	b := Host()
	defer b.Close()
	const n = 1 << 20
	var wg sync.WaitGroup
	for range 20 {
		p := mustAlloc(t, b, n)
		wg.Go(func() {
			buf := make([]byte, n)
			// Either the copy finishes before Free or it reports ErrInvalidPtr.
			for range 4 {
				if err := b.CopyDtoH(buf, p); err != nil && !errors.Is(err, ErrInvalidPtr) {
					t.Error(err)
				}
			}
		})
		if err := b.Free(p); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

func TestFill(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 7, 64, 1000, 1 << 20, 1<<20 + 1, 100000, 3<<20 + 5} {
		b := make([]byte, n)
		fill(b, 9)
		for i, v := range b {
			if v != 9 {
				t.Fatalf("fill(%d): byte %d is %d", n, i, v)
			}
		}
	}
}

// TestHostStreamQueueKeepsItsArray: a host stream's queue pops in order,
// reuses its array once it drains, and stays within an array of 128
// when twenty ops wait at all times (ops queued as fast as they run).
func TestHostStreamQueueKeepsItsArray(t *testing.T) {
	s := &hostStream{}
	run := func(op hostOp) {
		if err := op.run(); err != nil {
			t.Fatal(err)
		}
	}
	var ran []int
	push := func(i int) { s.ops = append(s.ops, opFunc(func() error { ran = append(ran, i); return nil })) }
	for i := range 10 {
		push(i)
	}
	arr := &s.ops[:1][0]
	for range 10 {
		run(s.pop())
	}
	push(10)
	if len(s.ops) != 1 || &s.ops[0] != arr {
		t.Fatalf("after draining, the queue holds %d ops in a new array: %v", len(s.ops), &s.ops[0] != arr)
	}
	run(s.pop())
	next := 11
	for range 20 { // twenty queued at all times
		push(next)
		next++
	}
	for range 100000 {
		run(s.pop())
		push(next)
		next++
		if len(s.ops) > 128 {
			t.Fatalf("a queue of %d ops in an array of %d", len(s.ops)-s.next, len(s.ops))
		}
	}
	for len(s.ops) > 0 {
		run(s.pop())
	}
	for i, v := range ran {
		if v != i {
			t.Fatalf("op %d ran as the %d-th", v, i)
		}
	}
	if len(ran) != next {
		t.Fatalf("%d ops ran, %d queued", len(ran), next)
	}
}

// other is a backend that is not the host backend, though it wraps one.
type other struct{ Backend }

// TestHostBytes: the host backend's device memory is host memory, and
// HostBytes gives its bytes in place; any other backend, and a range
// outside a live allocation, gives none.
func TestHostBytes(t *testing.T) {
	b := Host()
	defer b.Close()
	p, err := b.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	mem, ok := HostBytes(b, p+8, 16)
	if !ok || len(mem) != 16 {
		t.Fatalf("HostBytes of a live range: %d bytes, %v", len(mem), ok)
	}
	mem[0] = 7
	got := make([]byte, 1)
	if err := b.CopyDtoH(got, p+8); err != nil || got[0] != 7 {
		t.Errorf("a write through HostBytes reads back as %d (%v), want 7", got[0], err)
	}
	if _, ok := HostBytes(b, p+60, 8); ok {
		t.Error("HostBytes past the allocation's end answered bytes")
	}
	if _, ok := HostBytes(other{b}, p, 8); ok {
		t.Error("HostBytes of another backend answered bytes")
	}
	if err := b.Free(p); err != nil {
		t.Fatal(err)
	}
	if _, ok := HostBytes(b, p, 8); ok {
		t.Error("HostBytes of a freed allocation answered bytes")
	}
}

// TestHostBytesOutlivesClose: Close leaves an allocation whose bytes
// HostBytes gave out mapped, so that a store still copying there after
// its backend closed writes to memory, not to an unmapped page; the
// allocations it never gave out are unmapped as before.
func TestHostBytesOutlivesClose(t *testing.T) {
	b := Host()
	p, err := b.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Alloc(4096); err != nil { // never given out
		t.Fatal(err)
	}
	mem, ok := HostBytes(b, p, 4096)
	if !ok {
		t.Fatal("HostBytes of a live allocation answered none")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	mem[4095] = 9 // faults if Close unmapped it
	if mem[4095] != 9 {
		t.Error("the bytes HostBytes gave out do not hold a write after Close")
	}
	if _, ok := HostBytes(b, p, 8); ok {
		t.Error("HostBytes of a closed backend answered bytes")
	}
}

// mapper wraps the host backend and answers HostBytes for itself when on.
type mapper struct {
	Backend
	on bool
}

func (m mapper) HostBytes(p Ptr, n int) ([]byte, bool) {
	if !m.on {
		return nil, false
	}
	return HostBytes(m.Backend, p, n)
}

// TestHostBytesThroughAMapper: a wrapper of the host backend gives out
// the same bytes as the host backend through HostMapper, or none when it
// says so; a wrapper that is no HostMapper gives none.
func TestHostBytesThroughAMapper(t *testing.T) {
	b := Host()
	defer b.Close()
	p, err := b.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	direct, ok := HostBytes(b, p, 64)
	if !ok {
		t.Fatal("HostBytes of the host backend answered none")
	}
	got, ok := HostBytes(mapper{b, true}, p, 64)
	if !ok || &got[0] != &direct[0] {
		t.Error("a mapping wrapper did not give out the host backend's bytes")
	}
	if _, ok := HostBytes(mapper{b, false}, p, 64); ok {
		t.Error("a wrapper that maps nothing gave bytes out")
	}
	if _, ok := HostBytes(struct{ Backend }{b}, p, 64); ok {
		t.Error("a wrapper that is no HostMapper gave bytes out")
	}
}
