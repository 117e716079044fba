//go:build linux

package device

import (
	"testing"
	"time"
)

// TestCUDABlockingCallsHoldNoLock: while one goroutine waits in
// cuEventSynchronize for held-back stream work, Free, Alloc and a copy on
// other memory from other goroutines go on: the backend holds no lock
// across a driver call that waits for the device.
func TestCUDABlockingCallsHoldNoLock(t *testing.T) {
	f := fakeDriver(t)
	c := openFake(t, f)
	defer c.Close()
	a := mustAlloc(t, c, 1024)
	other := mustAlloc(t, c, 1024)
	st, err := c.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f.Must(t, "hold", 1)
	defer f.Set("hold", 0)
	if err := c.CopyHtoDAsync(st, a, make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	ev, err := c.Record(st)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	waited := make(chan error, 1)
	go func() { waited <- ev.Wait() }()
	time.Sleep(20 * time.Millisecond) // the waiter is inside cuEventSynchronize
	done := make(chan error, 1)
	go func() {
		if err := c.Free(other); err != nil {
			done <- err
			return
		}
		p, err := c.Alloc(512)
		if err != nil {
			done <- err
			return
		}
		buf := make([]byte, 512)
		if err := c.CopyDtoH(buf, p); err != nil {
			done <- err
			return
		}
		done <- c.Free(p)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		f.Set("hold", 0)
		t.Fatal("Free, Alloc and a copy of unrelated memory waited for another goroutine's cuEventSynchronize")
	}
	select {
	case <-waited:
		t.Fatal("the event completed while its stream was held")
	default:
	}
	f.Set("hold", 0)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
}
