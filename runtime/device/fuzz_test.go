package device

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzHost runs a sequence of operations, decoded from the input, on a host
// backend and on a model of its memory, and checks that they agree: valid
// calls succeed and move the same bytes, invalid ones fail with the right
// sentinel and change nothing, and nothing faults.
func FuzzHost(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, prog []byte) {
		b := NewHost(HostOptions{MaxBytes: 4096})
		defer b.Close()
		runProgram(t, b, prog)
	})
}

func addSeeds(f *testing.F) {
	f.Add([]byte{0, 50, 2, 0, 3, 10, 3, 0, 0, 20})
	f.Add([]byte{0, 10, 0, 10, 4, 0, 1, 2, 5, 5, 1, 0, 3, 0, 0, 4})
	f.Add([]byte{0, 255, 1, 0, 2, 0, 0, 1, 7, 9, 9, 9})
	f.Add([]byte{0, 100, 5, 0, 99, 3, 7, 6, 0, 200, 2, 1, 190, 30})
}

// modelRegion is the model's copy of one live allocation.
type modelRegion struct {
	base Ptr
	mem  []byte
}

// runProgram interprets prog: each operation is an opcode byte and its
// arguments, read as bytes (missing ones read as zero).
func runProgram(t *testing.T, b Backend, prog []byte) {
	var live []modelRegion
	next := func() int {
		if len(prog) == 0 {
			return 0
		}
		v := prog[0]
		prog = prog[1:]
		return int(v)
	}
	// find returns the model's bytes for [p, p+n) or nil when they are not
	// inside one live allocation.
	find := func(p Ptr, n int) []byte {
		for _, r := range live {
			if n >= 0 && p >= r.base && uint64(p-r.base)+uint64(n) <= uint64(len(r.mem)) {
				off := int(p - r.base)
				return r.mem[off : off+n]
			}
		}
		return nil
	}
	// ptr picks an address: inside or just past a live allocation, or wild.
	ptr := func() (Ptr, int) {
		i := next()
		if len(live) == 0 || i%8 == 7 {
			return Ptr(i) << 3, 0
		}
		r := live[i%len(live)]
		return r.base + Ptr(next()%(len(r.mem)+8)), len(r.mem)
	}
	check := func(op string, err error, valid bool) {
		t.Helper()
		if valid && err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if !valid && !errors.Is(err, ErrInvalidPtr) && !errors.Is(err, ErrInvalidSize) {
			t.Fatalf("%s: got %v, want ErrInvalidPtr or ErrInvalidSize", op, err)
		}
	}
	for steps := 0; len(prog) > 0 && steps < 200; steps++ {
		switch next() % 8 {
		case 0:
			n := next()*4 - 20
			p, err := b.Alloc(n)
			switch {
			case n <= 0:
				check("Alloc", err, false)
			case errors.Is(err, ErrOutOfMemory):
			case err != nil:
				t.Fatalf("Alloc(%d): %v", n, err)
			default:
				live = append(live, modelRegion{base: p, mem: make([]byte, n)})
			}
		case 1:
			p, _ := ptr()
			err := b.Free(p)
			i := -1
			for j, r := range live {
				if r.base == p {
					i = j
				}
			}
			check("Free", err, i >= 0)
			if i >= 0 {
				live = append(live[:i], live[i+1:]...)
			}
		case 2:
			p, _ := ptr()
			src := bytes.Repeat([]byte{byte(next())}, next()%70)
			dst := find(p, len(src))
			check("CopyHtoD", b.CopyHtoD(p, src), dst != nil)
			copy(dst, src)
		case 3:
			p, _ := ptr()
			dst := make([]byte, next()%70)
			want := find(p, len(dst))
			check("CopyDtoH", b.CopyDtoH(dst, p), want != nil)
			if want != nil && !bytes.Equal(dst, want) {
				t.Fatalf("CopyDtoH(%d bytes at %#x) = %v, model has %v", len(dst), uint64(p), dst, want)
			}
		case 4:
			dst, _ := ptr()
			src, _ := ptr()
			n := next()%70 - 2
			d, s := find(dst, n), find(src, n)
			check("CopyDtoD", b.CopyDtoD(dst, src, n), d != nil && s != nil)
			copy(d, s)
		case 5:
			p, _ := ptr()
			v, n := byte(next()), next()%70-2
			d := find(p, n)
			check("Memset", b.Memset(p, v, n), d != nil)
			for i := range d {
				d[i] = v
			}
		case 6:
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			if _, _, err := b.MemInfo(); err != nil {
				t.Fatal(err)
			}
		case 7:
			// Read back a whole allocation and compare with the model.
			if len(live) == 0 {
				continue
			}
			r := live[next()%len(live)]
			got := make([]byte, len(r.mem))
			if err := b.CopyDtoH(got, r.base); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, r.mem) {
				t.Fatalf("allocation at %#x differs from the model", uint64(r.base))
			}
		}
	}
}
