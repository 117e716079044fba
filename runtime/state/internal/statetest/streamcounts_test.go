package statetest

import (
	"errors"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

func TestStreamCounts(t *testing.T) {
	c := NewStreamCounts(Host(t))
	st, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := c.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(p)
	c.Reset()
	for range 2 {
		if err := c.CopyHtoDAsync(st, p, make([]byte, 16)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.CopyDtoHAsync(st, make([]byte, 8), p); err != nil {
		t.Fatal(err)
	}
	ev, err := c.Record(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Wait(); err != nil {
		t.Fatal(err)
	}
	ev.Close()
	if c.Calls("CopyHtoDAsync") != 2 || c.Bytes("CopyHtoDAsync") != 32 || c.Calls("CopyDtoHAsync") != 1 || c.Calls("Record") != 1 {
		t.Errorf("counts: %v calls, %v bytes", c.calls, c.bytes)
	}
	c.Faults.Arm(OpRecord, 0)
	if _, err := c.Record(st); !errors.Is(err, ErrInjected) {
		t.Fatalf("armed Record: %v, want ErrInjected", err)
	}
	if c.Calls("Record") != 2 {
		t.Errorf("the failed Record is not counted: %d Records", c.Calls("Record"))
	}
	var b device.Backend = c
	if _, ok := b.(device.BatchCopier); ok {
		t.Error("StreamCounts shows batches")
	}
}

func TestBatchCounts(t *testing.T) {
	host := Host(t)
	if _, ok := host.(device.BatchRecorder); !ok {
		t.Skip("the host backend records no batches")
	}
	c := NewRecordCounts(host)
	st, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := c.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free(p)
	two := []device.HostCopy{{Dst: p, Src: make([]byte, 8)}, {Dst: p + 32, Src: make([]byte, 8)}}
	if err := c.CopiesHtoD(two); err != nil {
		t.Fatal(err)
	}
	if err := c.CopiesDtoHAsync(st, []device.HostRead{{Dst: make([]byte, 4), Src: p}}); err != nil {
		t.Fatal(err)
	}
	ev, err := c.CopiesHtoDAsyncRecord(st, two)
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Wait(); err != nil {
		t.Fatal(err)
	}
	ev.Close()
	if c.Calls("CopiesHtoD") != 1 || c.Bytes("CopiesHtoD") != 16 || c.Calls("CopiesDtoHAsync") != 1 ||
		c.Calls("CopiesHtoDAsyncRecord") != 1 || c.Calls("CopyHtoD") != 0 {
		t.Errorf("counts: %v calls, %v bytes", c.calls, c.bytes)
	}
	c.Faults.Arm(OpCopy, 0)
	if err := c.CopiesHtoDAsync(st, two); !errors.Is(err, ErrInjected) {
		t.Fatalf("armed batch: %v, want ErrInjected", err)
	}
	if err := c.CopyHtoD(p, make([]byte, 8)); err != nil {
		t.Fatalf("a synchronous copy never fails: %v", err)
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
}
