package statetest

import (
	"bytes"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

func TestStreamRigHoldsAndFills(t *testing.T) {
	EachStreamRig(t, func(t *testing.T, r *StreamRig) {
		p, err := r.Backend.Alloc(64)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Backend.Free(p)
		st, err := r.Streams().NewStream()
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		r.Hold(t, st)
		if err := r.Kernels().Launch(st, r.Fill, device.Dim3{}, device.Dim3{X: 64}, 0, p, uint32(0x5A), uint64(64)); err != nil {
			r.Release()
			t.Fatal(err)
		}
		ev, err := r.Streams().Record(st)
		if err != nil {
			r.Release()
			t.Fatal(err)
		}
		defer ev.Close()
		if done, _ := ev.Done(); done {
			t.Error("the work queued after Hold completed before Release")
		}
		r.Release()
		if err := ev.Wait(); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 64)
		if err := r.Backend.CopyDtoH(got, p); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, bytes.Repeat([]byte{0x5A}, 64)) {
			t.Errorf("FillKernel wrote %x, want 64 bytes of 5a", got)
		}
	})
}

func TestHostGate(t *testing.T) {
	b := Host(t)
	fn, open := HostGate(t, b)
	defer open()
	st, err := b.(device.Streams).NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := b.(device.Kernels).Launch(st, fn, device.Dim3{}, device.Dim3{}, 0); err != nil {
		t.Fatal(err)
	}
	ev, err := b.(device.Streams).Record(st)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	if done, _ := ev.Done(); done {
		t.Error("the stream ran past a closed gate")
	}
	open()
	open() // a second open is a no-op
	if err := ev.Wait(); err != nil {
		t.Fatal(err)
	}
}
