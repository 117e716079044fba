//go:build linux

package device

import "testing"

// FuzzCUDAFake runs the same programs as FuzzHost on the CUDA backend over
// the fake driver, so every call path to the driver meets bad input.
func FuzzCUDAFake(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, prog []byte) {
		fk := fakeDriver(t)
		fk.Must(t, "total", 4096)
		c, err := OpenCUDA(CUDAOptions{Library: fk.Path})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		runProgram(t, c, prog)
		if n := fk.Get("badctx"); n != 0 {
			t.Fatalf("%d driver calls without the context current", n)
		}
	})
}
