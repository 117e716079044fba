//go:build linux

package device

import "testing"

// TestCUDAFakeCallsAllocateNothing: the calls a store makes per row or per
// copy-on-write make no allocation on the CUDA backend, as on the host
// backend. Record and CopiesHtoDAsyncRecord allocate the Event they
// return, and nothing else.
func TestCUDAFakeCallsAllocateNothing(t *testing.T) {
	if raceDetector {
		t.Skip("under the race detector, sync.Pool drops entries at random and the driver's calls allocate")
	}
	f := fakeDriver(t)
	c := openFake(t, f)
	defer c.Close()
	p, q := mustAlloc(t, c, 4096), mustAlloc(t, c, 4096)
	buf := make([]byte, 4096)
	st, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pinned, err := c.HostAlloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer c.HostFree(pinned)
	ev, err := c.Record(st)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	copies := []HostCopy{{Dst: p, Src: buf[:528]}, {Dst: q + 64, Src: buf[528:1024]}}
	async := []HostCopy{{Dst: p, Src: pinned[:528]}, {Dst: q + 64, Src: pinned[528:1024]}}
	recordAndClose := func(ev Event, err error) error {
		if err != nil {
			return err
		}
		return ev.Close()
	}
	for _, tc := range []struct {
		name string
		want float64 // allocations per call
		call func() error
	}{
		{"CopyHtoD", 0, func() error { return c.CopyHtoD(p, buf) }},
		{"CopyDtoH", 0, func() error { return c.CopyDtoH(buf, p) }},
		{"CopyDtoD", 0, func() error { return c.CopyDtoD(q, p, 4096) }},
		{"Memset", 0, func() error { return c.Memset(p, 7, 4096) }},
		{"Sync", 0, c.Sync},
		{"CopiesHtoD", 0, func() error { return c.CopiesHtoD(copies) }},
		{"CopyHtoDAsync", 0, func() error { return c.CopyHtoDAsync(st, p, pinned) }},
		{"CopyDtoHAsync", 0, func() error { return c.CopyDtoHAsync(st, pinned, q) }},
		{"CopyDtoDAsync", 0, func() error { return c.CopyDtoDAsync(st, q, p, 4096) }},
		{"CopiesHtoDAsync", 0, func() error { return c.CopiesHtoDAsync(st, async) }},
		{"WaitEvent", 0, func() error { return c.WaitEvent(st, ev) }},
		{"Event.Done", 0, func() error { _, err := ev.Done(); return err }},
		{"Event.Wait", 0, ev.Wait},
		{"Stream.Sync", 0, st.Sync},
		{"Record, Event.Close", 1, func() error { return recordAndClose(c.Record(st)) }},
		{"CopiesHtoDAsyncRecord, Event.Close", 1, func() error { return recordAndClose(c.CopiesHtoDAsyncRecord(st, async)) }},
	} {
		var err error
		n := testing.AllocsPerRun(200, func() {
			if e := tc.call(); e != nil && err == nil {
				err = e
			}
		})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if n != tc.want {
			t.Errorf("%s: %v allocations per call, want %v", tc.name, n, tc.want)
		}
	}
	if err := st.Sync(); err != nil {
		t.Fatal(err)
	}
}
