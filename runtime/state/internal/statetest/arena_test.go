package statetest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

func TestArenaAllocatesBackToBack(t *testing.T) {
	a := NewArena(256)
	p, err := a.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	q, err := a.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	if q != p+64 {
		t.Fatalf("second allocation at %x, want %x, right after the first", q, p+64)
	}
	want := bytes.Repeat([]byte{7}, 64)
	if err := a.CopyHtoD(q, want); err != nil {
		t.Fatal(err)
	}
	if err := a.CopyDtoD(p, q, 64); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 64)
	if err := a.CopyDtoH(got, p); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("copied back: %v, %v; want the bytes written", got, err)
	}
	if free, total, _ := a.MemInfo(); free != 128 || total != 256 {
		t.Errorf("MemInfo = %d free of %d, want 128 of 256", free, total)
	}
	if _, err := a.Alloc(200); !errors.Is(err, device.ErrOutOfMemory) {
		t.Errorf("an allocation past the arena: %v, want device.ErrOutOfMemory", err)
	}
}

func TestArenaRefusesRangesAcrossAllocations(t *testing.T) {
	a := NewArena(256)
	p, err := a.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Alloc(64); err != nil {
		t.Fatal(err)
	}
	if err := a.CopyHtoD(p+32, make([]byte, 64)); err == nil {
		t.Error("a copy into the next allocation succeeded")
	}
	if err := a.CopyDtoH(make([]byte, 65), p); err == nil {
		t.Error("a copy out of two allocations succeeded")
	}
	if err := a.Memset(p+63, 0, 2); err == nil {
		t.Error("a memset across two allocations succeeded")
	}
	if err := a.CopyDtoD(p, p+128, 8); err == nil {
		t.Error("a copy from memory not allocated succeeded")
	}
	if err := a.Memset(p, 1, 64); err != nil {
		t.Errorf("a memset of the whole allocation: %v", err)
	}
}
