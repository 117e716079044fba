//go:build linux

package device

import (
	"errors"
	"strings"
	"testing"
)

func fakeRig(f *fake) func(t *testing.T) *asyncRig {
	return func(t *testing.T) *asyncRig {
		c := openFake(t, f)
		return newRig(t, c,
			func(t *testing.T, _ Stream) { f.Must(t, "hold", 1) },
			func() { f.Set("hold", 0) })
	}
}

// TestCUDAFakeAsync runs the stream and kernel checks on the fake driver,
// whose streams are threads that run queued work later, in order.
func TestCUDAFakeAsync(t *testing.T) {
	f := fakeDriver(t)
	testAsync(t, fakeRig(f))
	f.Set("hold", 0)
	for _, k := range []string{"streams", "events", "pinned", "live", "badctx"} {
		if n := f.Get(k); n != 0 {
			t.Errorf("fake driver: %s = %d after every backend closed; want 0", k, n)
		}
	}
	if n := f.Get("launches"); n == 0 {
		t.Error("no kernel ran on the fake driver")
	}
}

// TestCUDAMissingAsyncSymbols: a library without the stream entry points
// still opens; streams answer an error naming what is missing.
func TestCUDAMissingAsyncSymbols(t *testing.T) {
	f := fakeDriver(t, "-DFAKE_NO_ASYNC")
	c := openFake(t, f)
	defer c.Close()
	_, err := c.NewStream()
	if !errors.Is(err, errors.ErrUnsupported) || err == nil || !strings.Contains(err.Error(), "cuLaunchKernel") {
		t.Errorf("NewStream without the async entry points: %v", err)
	}
	if _, err := c.LoadModule(testPTX); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("LoadModule without the entry points: %v", err)
	}
}
