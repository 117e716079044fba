package statetest

import (
	"errors"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

func TestFaultsArm(t *testing.T) {
	f := NewFaults(Host(t))
	p, err := f.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	f.Arm(OpCopy, 1) // the second copy fails, not the memset between
	if err := f.CopyHtoD(p, make([]byte, 8)); err != nil {
		t.Fatalf("first copy: %v", err)
	}
	if err := f.Memset(p, 0, 8); err != nil {
		t.Fatalf("memset, not armed: %v", err)
	}
	if err := f.CopyDtoH(make([]byte, 8), p); !errors.Is(err, ErrInjected) {
		t.Fatalf("second copy: %v, want ErrInjected", err)
	}
	if err := f.CopyDtoD(p, p, 8); err != nil {
		t.Fatalf("a fault fails one call: the third copy: %v", err)
	}
	if !f.Disarm() {
		t.Error("Disarm: the fault did not fire")
	}
	f.Arm(OpAlloc, 0)
	if _, err := f.Alloc(8); !errors.Is(err, ErrInjected) || !errors.Is(err, device.ErrOutOfMemory) {
		t.Errorf("armed alloc: %v, want ErrInjected and device.ErrOutOfMemory", err)
	}
	if got, want := f.Calls(), 6; got != want {
		t.Errorf("Calls = %d, want %d", got, want)
	}
	if got := f.Allocs(); got != 2 {
		t.Errorf("Allocs = %d, want 2", got)
	}
	if err := f.Free(p); err != nil {
		t.Fatal(err)
	}
}

func TestFaultsFailWhen(t *testing.T) {
	f := NewFaults(Host(t))
	p, err := f.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Free(p)
	f.FailWhen(func(op Op, method string) bool { return method == "CopyDtoH" })
	for range 2 {
		if err := f.CopyDtoH(make([]byte, 8), p); !errors.Is(err, ErrInjected) {
			t.Fatalf("copy to host: %v, want ErrInjected every time", err)
		}
	}
	if err := f.CopyHtoD(p, make([]byte, 8)); err != nil {
		t.Fatalf("copy to device: %v", err)
	}
	if !f.Disarm() {
		t.Error("Disarm: the predicate's fault did not fire")
	}
	if err := f.CopyDtoH(make([]byte, 8), p); err != nil {
		t.Fatalf("after Disarm: %v", err)
	}
}

func TestCounts(t *testing.T) {
	c := NewCounts(Host(t))
	p, err := c.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Memset(p, 0, 64); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := c.CopyDtoD(p, p+32, 16); err != nil {
			t.Fatal(err)
		}
	}
	if c.Calls("CopyDtoD") != 3 || c.Bytes("CopyDtoD") != 48 || c.Bytes("Memset") != 64 || c.Bytes("Alloc") != 64 {
		t.Errorf("counts: %v calls, %v bytes", c.calls, c.bytes)
	}
	c.Reset()
	if live := c.Live(); len(live) != 1 || live[p] != 64 {
		t.Errorf("Live before the Free: %v, want the one allocation", live)
	}
	if err := c.Free(p); err != nil {
		t.Fatal(err)
	}
	if c.Calls("CopyDtoD") != 0 || c.Calls("Free") != 1 || len(c.Live()) != 0 {
		t.Errorf("after Reset and a Free: %v, live %v", c.calls, c.Live())
	}
}

func TestGatedFree(t *testing.T) {
	g := &GatedFree{Backend: Host(t)}
	p, err := g.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	entered, let := g.Arm()
	done := make(chan error)
	go func() { done <- g.Free(p) }()
	<-entered
	select {
	case err := <-done:
		t.Fatalf("Free returned before let: %v", err)
	default:
	}
	let()
	let() // a second let is a no-op
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestPlainHidesOptionalInterfaces(t *testing.T) {
	b := Host(t)
	if _, ok := b.(device.Streams); !ok {
		t.Skip("the host backend has no streams: nothing to hide")
	}
	var pb device.Backend = Plain{Backend: b}
	if _, ok := pb.(device.Streams); ok {
		t.Error("Plain shows device.Streams")
	}
}

func TestFaultsArmMethod(t *testing.T) {
	f := NewStreamFaults(Host(t))
	st, err := f.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := f.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Free(p)
	f.ArmMethod("CopyHtoDAsync", 1)
	if err := f.CopyDtoHAsync(st, make([]byte, 8), p); err != nil {
		t.Fatalf("another method: %v", err)
	}
	if err := f.CopyHtoDAsync(st, p, make([]byte, 8)); err != nil {
		t.Fatalf("the first CopyHtoDAsync: %v", err)
	}
	if err := f.CopyHtoDAsync(st, p, make([]byte, 8)); !errors.Is(err, ErrInjected) {
		t.Fatalf("the second CopyHtoDAsync: %v, want ErrInjected", err)
	}
	f.Arm(OpRecord, 0)
	if _, err := f.Record(st); !errors.Is(err, ErrInjected) {
		t.Fatalf("armed Record: %v, want ErrInjected", err)
	}
	ev, err := f.Record(st)
	if err != nil {
		t.Fatalf("the next Record: %v", err)
	}
	if err := ev.Wait(); err != nil {
		t.Fatal(err)
	}
	ev.Close()
}
