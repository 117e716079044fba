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
	dcopies := []DeviceCopy{{Dst: q, Src: p, Bytes: 528}, {Dst: q + 1024, Src: p + 64, Bytes: 256}}
	reads := []HostRead{{Dst: buf[:528], Src: p}, {Dst: buf[528:1024], Src: q + 64}}
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
		{"CopiesDtoD", 0, func() error { return c.CopiesDtoD(dcopies) }},
		{"CopiesDtoH", 0, func() error { _, err := c.CopiesDtoH(reads); return err }},
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

// TestCUDAFakeEventsReused: an event Close gives up is recorded again by
// the next Record rather than destroyed and created anew (two driver calls
// a staged async write saves), no more than maxSpareEvents are kept, and
// the backend's Close destroys those it kept.
func TestCUDAFakeEventsReused(t *testing.T) {
	f := fakeDriver(t)
	c := openFake(t, f)
	st, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	created, destroyed := f.Get("calls:cuEventCreate"), f.Get("calls:cuEventDestroy_v2")
	for range 100 {
		ev, err := c.Record(st)
		if err != nil {
			t.Fatal(err)
		}
		if err := ev.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.Get("calls:cuEventCreate") - created; n != 1 {
		t.Errorf("100 Record and Close in turn created %d driver events, want 1", n)
	}
	if n := f.Get("calls:cuEventDestroy_v2") - destroyed; n != 0 {
		t.Errorf("100 Record and Close in turn destroyed %d driver events, want 0", n)
	}
	// Held at once, then closed: the backend keeps maxSpareEvents.
	evs := make([]Event, maxSpareEvents+8)
	for i := range evs {
		if evs[i], err = c.Record(st); err != nil {
			t.Fatal(err)
		}
	}
	destroyed = f.Get("calls:cuEventDestroy_v2")
	for _, ev := range evs {
		if err := ev.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.Get("calls:cuEventDestroy_v2") - destroyed; n != 8 {
		t.Errorf("closing %d events destroyed %d, want 8", len(evs), n)
	}
	if err := st.Sync(); err != nil { // a destroyed event goes once its record ran
		t.Fatal(err)
	}
	if n := f.Get("events"); n != maxSpareEvents {
		t.Errorf("%d driver events live with every Event closed, want the %d kept", n, maxSpareEvents)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := f.Get("events"); n != 0 {
		t.Errorf("%d driver events live after Close, want 0", n)
	}
}

// TestCUDAFakeReusedEventWaitsForItsRecord: a driver event recorded again
// on reuse is not done while its new record is queued, though its old one
// has run.
func TestCUDAFakeReusedEventWaitsForItsRecord(t *testing.T) {
	f := fakeDriver(t)
	c := openFake(t, f)
	defer c.Close()
	st, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ev, err := c.Record(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := ev.Close(); err != nil {
		t.Fatal(err)
	}
	f.Must(t, "hold", 1) // queued work waits
	defer f.Set("hold", 0)
	again, err := c.Record(st) // the same driver event, recorded anew
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if n := f.Get("calls:cuEventCreate"); n != 1 {
		t.Fatalf("%d driver events created, want the first reused", n)
	}
	if done, err := again.Done(); done || err != nil {
		t.Errorf("reused event with its record queued: done %v, %v; want false, nil", done, err)
	}
	f.Set("hold", 0)
	if err := again.Wait(); err != nil {
		t.Fatal(err)
	}
	if done, err := again.Done(); !done || err != nil {
		t.Errorf("reused event after its record ran: done %v, %v; want true, nil", done, err)
	}
}
