package store

import (
	"fmt"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// BenchmarkServingRead reads rows of the 528 B layout back to the host
// synchronously, as a decode loop reads a row a token: Len, then 1 or 8
// rows from a row that moves through the state, of rows appended one at
// a time, so that their key and value blocks lie apart (docs/BENCHMARKS.md,
// "Reads").
func BenchmarkServingRead(b *testing.B) {
	be := device.Host()
	defer be.Close()
	p, err := NewPool(be, PoolOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	l := kvCacheLayout(128)
	l.Growth = Append
	h, err := p.NewHead(l, "s")
	if err != nil {
		b.Fatal(err)
	}
	defer h.Release()
	row := zeroRows(l, 1)
	for range 1024 {
		if err := h.Append(row); err != nil {
			b.Fatal(err)
		}
	}
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			dst := zeroRows(l, n)
			at := 0
			b.ReportAllocs()
			for b.Loop() {
				at = (at + 97) % (h.Len() - n)
				if err := h.Read(at, at+n, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
