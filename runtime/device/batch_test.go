package device

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// TestHostBatchCopies: a batch of copies lands as the copies one by one
// would, synchronously and on a stream; a batch with a range outside any
// allocation fails, and on a stream queues nothing (the copies before the
// bad one do not land either).
func TestHostBatchCopies(t *testing.T) {
	b := Host()
	defer b.Close()
	testBatchCopies(t, b)
}

func testBatchCopies(t *testing.T, b Backend) {
	bc := b.(BatchCopier)
	p, err := b.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	src := []byte("abcdefgh")
	want := make([]byte, 4096)
	copy(want[0:], src[:3])
	copy(want[100:], src[3:])
	if err := bc.CopiesHtoD([]HostCopy{{Dst: p, Src: src[:3]}, {Dst: p + 100, Src: src[3:]}}); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4096)
	if err := b.CopyDtoH(got, p); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after CopiesHtoD: %v, rows equal %v", err, bytes.Equal(got, want))
	}
	if err := bc.CopiesHtoD([]HostCopy{{Dst: p + 4090, Src: src}}); !errors.Is(err, ErrInvalidPtr) {
		t.Fatalf("a copy past the allocation: %v, want ErrInvalidPtr", err)
	}
	q, err := b.Alloc(4096) // copies that go from one allocation to another and back
	if err != nil {
		t.Fatal(err)
	}
	if err := bc.CopiesHtoD([]HostCopy{{Dst: q + 10, Src: src}, {Dst: p + 50, Src: src[:2]}, {Dst: q + 4088, Src: src}}); err != nil {
		t.Fatal(err)
	}
	copy(want[50:], src[:2])
	gotQ := make([]byte, 4096)
	if err := b.CopyDtoH(gotQ, q); err != nil || !bytes.Equal(gotQ[10:18], src) || !bytes.Equal(gotQ[4088:], src) {
		t.Fatalf("copies into a second allocation: %v", err)
	}
	if err := bc.CopiesHtoD([]HostCopy{{Dst: q, Src: src}, {Dst: q + 4095, Src: src[:2]}}); !errors.Is(err, ErrInvalidPtr) {
		t.Fatalf("a copy running past an allocation after one inside it: %v, want ErrInvalidPtr", err)
	}

	sb := b.(Streams)
	st, err := sb.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	copies := []HostCopy{{Dst: p + 200, Src: src[:4]}, {Dst: p + 300, Src: src[4:]}}
	if err := bc.CopiesHtoDAsync(st, copies); err != nil {
		t.Fatal(err)
	}
	copies[0].Dst = p + 1000 // the caller may reuse its slice at once
	copy(want[200:], src[:4])
	copy(want[300:], src[4:])
	bad := []HostCopy{{Dst: p + 500, Src: src}, {Dst: p + 4090, Src: src}}
	if err := bc.CopiesHtoDAsync(st, bad); !errors.Is(err, ErrInvalidPtr) {
		t.Fatalf("an async batch with a bad range: %v, want ErrInvalidPtr", err)
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := b.CopyDtoH(got, p); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after CopiesHtoDAsync: %v, rows equal %v", err, bytes.Equal(got, want))
	}
}

// TestHostBatchRecord: copies queued with their event in one call land
// before the event completes, more copies than the batch holds inline
// included; a bad range or a closed stream fails the call and queues
// nothing.
func TestHostBatchRecord(t *testing.T) {
	b := Host()
	defer b.Close()
	testBatchRecord(t, b)
}

func testBatchRecord(t *testing.T, b Backend) {
	br := b.(BatchRecorder)
	sb := b.(Streams)
	p, err := b.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sb.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	src := []byte("abcdefghij")
	want := make([]byte, 4096)
	for _, n := range []int{1, 2, 5} {
		copies := make([]HostCopy, n)
		for i := range copies {
			at := 64*n + 10*i
			copies[i] = HostCopy{Dst: p + Ptr(at), Src: src[i : i+3]}
			copy(want[at:], src[i:i+3])
		}
		ev, err := br.CopiesHtoDAsyncRecord(st, copies)
		if err != nil {
			t.Fatal(err)
		}
		copies[0].Dst = p + 4000 // the caller may reuse its slice at once
		if err := ev.Wait(); err != nil {
			t.Fatal(err)
		}
		if done, err := ev.Done(); !done || err != nil {
			t.Fatalf("%d copies: event after Wait: done %v, %v", n, done, err)
		}
		ev.Close()
		got := make([]byte, 4096)
		if err := b.CopyDtoH(got, p); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%d copies: after the event: %v, bytes equal %v", n, err, bytes.Equal(got, want))
		}
	}
	bad := []HostCopy{{Dst: p + 500, Src: src}, {Dst: p + 4090, Src: src}}
	if ev, err := br.CopiesHtoDAsyncRecord(st, bad); !errors.Is(err, ErrInvalidPtr) || ev != nil {
		t.Fatalf("a batch with a bad range: %v, %v; want no event, ErrInvalidPtr", ev, err)
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4096)
	if err := b.CopyDtoH(got, p); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("a failed batch landed a copy: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := br.CopiesHtoDAsyncRecord(st, []HostCopy{{Dst: p, Src: src}}); !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("a batch on a closed stream: %v, want ErrStreamClosed", err)
	}
}

// TestHostBatchReads: a batch of copies to the host lands as the copies
// one by one would, from one allocation and from two; a batch with a
// range outside any allocation fails and queues nothing (the copy before
// the bad one does not land either); the caller may reuse its slice of
// copies at once.
func TestHostBatchReads(t *testing.T) {
	b := Host()
	defer b.Close()
	testBatchReads(t, b)
}

func testBatchReads(t *testing.T, b Backend) {
	br := b.(BatchReader)
	p, q := allocTwo(t, b)
	if err := b.CopyHtoD(p+100, []byte("abcdefgh")); err != nil {
		t.Fatal(err)
	}
	if err := b.CopyHtoD(q+4092, []byte("wxyz")); err != nil {
		t.Fatal(err)
	}
	st, err := b.(Streams).NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, c, d := make([]byte, 3), make([]byte, 5), make([]byte, 4)
	copies := []HostRead{{Dst: a, Src: p + 100}, {Dst: d, Src: q + 4092}, {Dst: c, Src: p + 103}}
	if err := br.CopiesDtoHAsync(st, copies); err != nil {
		t.Fatal(err)
	}
	copies[0].Src = p // the caller may reuse its slice at once
	spoiled := []byte("untouched")
	bad := []HostRead{{Dst: spoiled[:4], Src: p + 100}, {Dst: make([]byte, 8), Src: q + 4090}}
	if err := br.CopiesDtoHAsync(st, bad); !errors.Is(err, ErrInvalidPtr) {
		t.Fatalf("an async batch with a bad range: %v, want ErrInvalidPtr", err)
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
	if string(a) != "abc" || string(c) != "defgh" || string(d) != "wxyz" {
		t.Fatalf("after CopiesDtoHAsync: %q %q %q, want \"abc\" \"defgh\" \"wxyz\"", a, c, d)
	}
	if string(spoiled) != "untouched" {
		t.Fatalf("a batch that failed its checks wrote %q", spoiled)
	}
}

// TestHostBatchCopiesToHost: a batch of copies to the host lands as the
// copies one by one would; a bad range stops it there, with CopyDtoH's
// error, the copies before it done and those after it not.
func TestHostBatchCopiesToHost(t *testing.T) {
	b := Host()
	defer b.Close()
	testBatchCopiesToHost(t, b)
}

func testBatchCopiesToHost(t *testing.T, b Backend) {
	br := b.(BatchReadCopier)
	p, q := allocTwo(t, b)
	if err := b.CopyHtoD(p+100, []byte("abcdefgh")); err != nil {
		t.Fatal(err)
	}
	if err := b.CopyHtoD(q+4092, []byte("wxyz")); err != nil {
		t.Fatal(err)
	}
	a, c, d := make([]byte, 3), make([]byte, 5), make([]byte, 4)
	copies := []HostRead{{Dst: a, Src: p + 100}, {Dst: d, Src: q + 4092}, {Dst: nil, Src: p + 4096}, {Dst: c, Src: p + 103}}
	if n, err := br.CopiesDtoH(copies); err != nil || n != len(copies) {
		t.Fatalf("CopiesDtoH: %d, %v; want %d, nil", n, err, len(copies))
	}
	if string(a) != "abc" || string(c) != "defgh" || string(d) != "wxyz" {
		t.Fatalf("after CopiesDtoH: %q %q %q, want \"abc\" \"defgh\" \"wxyz\"", a, c, d)
	}
	if n, err := br.CopiesDtoH(nil); err != nil || n != 0 {
		t.Fatalf("an empty batch: %d, %v", n, err)
	}
	done, after := []byte("....."), []byte("untouched")
	bad := []HostRead{{Dst: done, Src: p + 100}, {Dst: make([]byte, 8), Src: q + 4090}, {Dst: after[:4], Src: p + 100}}
	n, err := br.CopiesDtoH(bad)
	want := b.CopyDtoH(make([]byte, 8), q+4090)
	if n != 1 || !errors.Is(err, ErrInvalidPtr) || err.Error() != want.Error() {
		t.Fatalf("a batch with a bad second range: %d, %v; want 1, %v", n, err, want)
	}
	if string(done) != "abcde" || string(after) != "untouched" {
		t.Fatalf("a batch that stopped at its second copy: first %q, third %q; want \"abcde\", \"untouched\"", done, after)
	}
}

// TestHostDeviceBatchCopies: a batch of copies within device memory lands
// as the copies one by one would, overlapping ones included; a batch with
// a range outside any allocation fails and copies nothing, the copies
// before the bad one included.
func TestHostDeviceBatchCopies(t *testing.T) {
	b := Host()
	defer b.Close()
	testDeviceBatchCopies(t, b)
}

func testDeviceBatchCopies(t *testing.T, b Backend) {
	bc := b.(DeviceBatchCopier)
	p, q := allocTwo(t, b)
	src := make([]byte, 4096)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	if err := b.CopyHtoD(p, src); err != nil {
		t.Fatal(err)
	}
	zero := make([]byte, 4096)
	if err := b.CopyHtoD(q, zero); err != nil {
		t.Fatal(err)
	}
	// One copy a column, as a delta's: p to q and back, then one within p
	// that overlaps itself.
	copies := []DeviceCopy{{Dst: q, Src: p + 256, Bytes: 256}, {Dst: q + 1024, Src: p, Bytes: 8}, {Dst: p + 2048, Src: q + 1024, Bytes: 8}, {Dst: p + 3001, Src: p + 3000, Bytes: 100}}
	wantP := slices.Clone(src)
	wantQ := slices.Clone(zero)
	copy(wantQ[0:256], wantP[256:512])
	copy(wantQ[1024:1032], wantP[0:8])
	copy(wantP[2048:2056], wantQ[1024:1032])
	copy(wantP[3001:3101], wantP[3000:3100])
	if err := bc.CopiesDtoD(copies); err != nil {
		t.Fatal(err)
	}
	gotP, gotQ := make([]byte, 4096), make([]byte, 4096)
	if err := b.CopyDtoH(gotP, p); err != nil || !bytes.Equal(gotP, wantP) {
		t.Fatalf("after CopiesDtoD, the first allocation: %v, equal %v", err, bytes.Equal(gotP, wantP))
	}
	if err := b.CopyDtoH(gotQ, q); err != nil || !bytes.Equal(gotQ, wantQ) {
		t.Fatalf("after CopiesDtoD, the second allocation: %v, equal %v", err, bytes.Equal(gotQ, wantQ))
	}
	for _, bad := range [][]DeviceCopy{
		{{Dst: q + 512, Src: p, Bytes: 8}, {Dst: q, Src: p + 4090, Bytes: 8}}, // a source past its allocation
		{{Dst: q + 512, Src: p, Bytes: 8}, {Dst: q + 4095, Src: p, Bytes: 2}}, // a destination past its allocation
		{{Dst: q + 512, Src: p, Bytes: -1}},
	} {
		if err := bc.CopiesDtoD(bad); err == nil {
			t.Fatalf("%v: no error", bad)
		}
		if err := b.CopyDtoH(gotQ, q); err != nil || !bytes.Equal(gotQ, wantQ) {
			t.Fatalf("%v: a failed batch copied something (%v)", bad, err)
		}
	}
	if err := bc.CopiesDtoD(nil); err != nil {
		t.Fatalf("no copies: %v", err)
	}
	for _, a := range []Ptr{p, q} {
		if err := b.Free(a); err != nil {
			t.Fatal(err)
		}
	}
	if err := bc.CopiesDtoD([]DeviceCopy{{Dst: q, Src: p, Bytes: 8}}); !errors.Is(err, ErrInvalidPtr) {
		t.Fatalf("copies between freed allocations: %v, want ErrInvalidPtr", err)
	}
}

// allocTwo returns two allocations of 4096 bytes on b.
func allocTwo(t *testing.T, b Backend) (p, q Ptr) {
	t.Helper()
	var err error
	if p, err = b.Alloc(4096); err != nil {
		t.Fatal(err)
	}
	if q, err = b.Alloc(4096); err != nil {
		t.Fatal(err)
	}
	return p, q
}
