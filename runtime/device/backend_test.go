package device

import (
	"bytes"
	"errors"
	"sync"
	"testing"
)

// testBackend runs the checks every Backend must pass: each method works on
// good input and fails cleanly, with the documented sentinel, on bad input.
// newBackend returns a fresh backend; the checks close it.
func testBackend(t *testing.T, newBackend func(t *testing.T) Backend) {
	t.Run("RoundTrip", func(t *testing.T) {
		b := newBackend(t)
		defer b.Close()
		p := mustAlloc(t, b, 1000)
		want := pattern(1000, 7)
		if err := b.CopyHtoD(p, want); err != nil {
			t.Fatalf("CopyHtoD: %v", err)
		}
		got := make([]byte, 1000)
		if err := b.CopyDtoH(got, p); err != nil {
			t.Fatalf("CopyDtoH: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatal("CopyDtoH did not return what CopyHtoD wrote")
		}
		// Interior pointers are valid.
		part := make([]byte, 10)
		if err := b.CopyDtoH(part, p+990); err != nil {
			t.Fatalf("CopyDtoH at an interior Ptr: %v", err)
		}
		if !bytes.Equal(part, want[990:]) {
			t.Fatal("CopyDtoH at an interior Ptr read the wrong bytes")
		}
		if err := b.CopyHtoD(p+100, []byte{1, 2, 3}); err != nil {
			t.Fatalf("CopyHtoD at an interior Ptr: %v", err)
		}
		if err := b.CopyDtoH(part[:5], p+99); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(part[:5], []byte{want[99], 1, 2, 3, want[103]}) {
			t.Fatalf("interior write: got %v", part[:5])
		}
		if err := b.Sync(); err != nil {
			t.Fatalf("Sync: %v", err)
		}
		if err := b.Free(p); err != nil {
			t.Fatalf("Free: %v", err)
		}
	})
	t.Run("ZeroedAlloc", func(t *testing.T) {
		b := newBackend(t)
		defer b.Close()
		p := mustAlloc(t, b, 1<<16)
		got := make([]byte, 1<<16)
		got[0] = 1
		if err := b.CopyDtoH(got, p); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, make([]byte, 1<<16)) {
			t.Fatalf("%s: fresh allocation is not zeroed", b.Name())
		}
	})
	t.Run("DtoDAndMemset", func(t *testing.T) {
		b := newBackend(t)
		defer b.Close()
		src := mustAlloc(t, b, 4096)
		dst := mustAlloc(t, b, 4096)
		want := pattern(4096, 3)
		if err := b.CopyHtoD(src, want); err != nil {
			t.Fatal(err)
		}
		if err := b.CopyDtoD(dst, src, 4096); err != nil {
			t.Fatalf("CopyDtoD: %v", err)
		}
		if err := b.Memset(dst+10, 0xAB, 20); err != nil {
			t.Fatalf("Memset: %v", err)
		}
		if err := b.Memset(dst+100, 0, 7); err != nil {
			t.Fatalf("Memset 0: %v", err)
		}
		for i := 10; i < 30; i++ {
			want[i] = 0xAB
		}
		clear(want[100:107])
		got := make([]byte, 4096)
		if err := b.CopyDtoH(got, dst); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatal("CopyDtoD then Memset: wrong content")
		}
		// Part of an allocation to part of another, and zero-length calls.
		if err := b.CopyDtoD(src+4000, dst+10, 96); err != nil {
			t.Fatal(err)
		}
		if err := b.CopyDtoH(got[:96], src+4000); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:96], want[10:106]) {
			t.Fatal("partial CopyDtoD: wrong content")
		}
		if err := b.CopyDtoD(dst, src, 0); err != nil {
			t.Fatalf("zero-length CopyDtoD: %v", err)
		}
		if err := b.Memset(dst, 1, 0); err != nil {
			t.Fatalf("zero-length Memset: %v", err)
		}
		if err := b.CopyHtoD(dst, nil); err != nil {
			t.Fatalf("zero-length CopyHtoD: %v", err)
		}
	})
	t.Run("BadInput", func(t *testing.T) {
		b := newBackend(t)
		defer b.Close()
		p := mustAlloc(t, b, 100)
		q := mustAlloc(t, b, 100)
		buf := make([]byte, 101)
		for _, c := range []struct {
			name string
			err  error
			want error
		}{
			{"Alloc(0)", second(b.Alloc(0)), ErrInvalidSize},
			{"Alloc(-1)", second(b.Alloc(-1)), ErrInvalidSize},
			{"CopyHtoD past end", b.CopyHtoD(p, buf), ErrInvalidPtr},
			{"CopyHtoD interior past end", b.CopyHtoD(p+50, buf[:51]), ErrInvalidPtr},
			{"CopyDtoH past end", b.CopyDtoH(buf, p), ErrInvalidPtr},
			{"CopyDtoH nil Ptr", b.CopyDtoH(buf[:1], 0), ErrInvalidPtr},
			{"CopyHtoD wild Ptr", b.CopyHtoD(Ptr(1)<<62, buf[:1]), ErrInvalidPtr},
			{"CopyHtoD max Ptr", b.CopyHtoD(^Ptr(0), buf[:1]), ErrInvalidPtr},
			{"CopyDtoD past src end", b.CopyDtoD(q, p+1, 100), ErrInvalidPtr},
			{"CopyDtoD past dst end", b.CopyDtoD(q+1, p, 100), ErrInvalidPtr},
			{"CopyDtoD negative", b.CopyDtoD(q, p, -1), ErrInvalidSize},
			{"Memset past end", b.Memset(p, 1, 101), ErrInvalidPtr},
			{"Memset at end", b.Memset(p+100, 1, 1), ErrInvalidPtr},
			{"Memset negative", b.Memset(p, 1, -5), ErrInvalidSize},
			{"Free interior", b.Free(p + 1), ErrInvalidPtr},
			{"Free nil", b.Free(0), ErrInvalidPtr},
		} {
			if !errors.Is(c.err, c.want) {
				t.Errorf("%s: got %v, want %v", c.name, c.err, c.want)
			}
		}
		// Nothing above changed p's contents or freed it.
		if err := b.CopyDtoH(buf[:100], p); err != nil {
			t.Fatalf("p unusable after bad calls: %v", err)
		}
		if !bytes.Equal(buf[:100], make([]byte, 100)) {
			t.Fatal("a failed call wrote to p")
		}
		if err := b.Free(p); err != nil {
			t.Fatal(err)
		}
		for name, err := range map[string]error{
			"Free twice":          b.Free(p),
			"CopyHtoD freed":      b.CopyHtoD(p, buf[:1]),
			"CopyDtoH freed":      b.CopyDtoH(buf[:1], p),
			"Memset freed":        b.Memset(p, 0, 1),
			"CopyDtoD from freed": b.CopyDtoD(q, p, 1),
		} {
			if !errors.Is(err, ErrInvalidPtr) {
				t.Errorf("%s: got %v, want ErrInvalidPtr", name, err)
			}
		}
	})
	t.Run("MemInfo", func(t *testing.T) {
		b := newBackend(t)
		defer b.Close()
		free, total, err := b.MemInfo()
		if err != nil {
			t.Fatalf("MemInfo: %v", err)
		}
		if total == 0 || free > total {
			t.Fatalf("MemInfo: free %d, total %d", free, total)
		}
	})
	t.Run("Close", func(t *testing.T) {
		b := newBackend(t)
		p := mustAlloc(t, b, 64)
		if err := b.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		buf := make([]byte, 8)
		for name, err := range map[string]error{
			"Alloc":    second(b.Alloc(8)),
			"Free":     b.Free(p),
			"CopyHtoD": b.CopyHtoD(p, buf),
			"CopyDtoH": b.CopyDtoH(buf, p),
			"CopyDtoD": b.CopyDtoD(p, p+8, 8),
			"Memset":   b.Memset(p, 0, 8),
			"Sync":     b.Sync(),
			"MemInfo":  third(b.MemInfo()),
			"Close":    b.Close(),
		} {
			if !errors.Is(err, ErrClosed) {
				t.Errorf("%s after Close: got %v, want ErrClosed", name, err)
			}
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		b := newBackend(t)
		defer b.Close()
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Go(func() {
				want := pattern(512, byte(g))
				got := make([]byte, 512)
				for range 50 {
					p, err := b.Alloc(512)
					if err != nil {
						errs <- err
						return
					}
					if err := b.CopyHtoD(p, want); err != nil {
						errs <- err
						return
					}
					if err := b.CopyDtoH(got, p); err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(got, want) {
						errs <- errors.New("concurrent round trip returned other bytes")
						return
					}
					if err := b.Free(p); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

func mustAlloc(t *testing.T, b Backend, n int) Ptr {
	t.Helper()
	p, err := b.Alloc(n)
	if err != nil {
		t.Fatalf("Alloc(%d): %v", n, err)
	}
	if p == 0 {
		t.Fatalf("Alloc(%d) returned a nil Ptr", n)
	}
	return p
}

// pattern returns n bytes that differ from their neighbours.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31) + seed
	}
	return b
}

func second[T any](_ T, err error) error        { return err }
func third[T, U any](_ T, _ U, err error) error { return err }
