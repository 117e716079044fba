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
	_, l, h := readBenchHead(b, 1024)
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

// readBenchHead returns a head of the 528 B layout on the host backend
// with rows appended one at a time, so that their key and value blocks lie
// apart, its layout and its backend: the read benchmarks' state.
func readBenchHead(b *testing.B, rows int) (device.Backend, *Layout, *Head) {
	be := device.Host()
	b.Cleanup(func() { be.Close() })
	p := benchPool(b, be, PoolOptions{})
	l := kvCacheLayout(128)
	l.Growth = Append
	h := must[*Head](b)(p.NewHead(l, "s"))
	b.Cleanup(func() { h.Release() })
	row := zeroRows(l, 1)
	for range rows {
		if err := h.Append(row); err != nil {
			b.Fatal(err)
		}
	}
	return be, l, h
}

// BenchmarkServingReadRows samples a minibatch, as a replay buffer is
// read: 256 rows at random indices of a state of 64K rows of the 528 B
// layout (32 MiB, past the CPU's caches), with ReadRows into one buffer,
// against the same rows copied out of Go slices that hold the state's
// columns. ratio is the store's time over the slices'.
func BenchmarkServingReadRows(b *testing.B) {
	const rows, batch = 1 << 16, 256
	_, l, h := readBenchHead(b, 0)
	all := zeroRows(l, rows)
	for c := range all {
		for i := range all[c] {
			all[c][i] = byte(i * (c + 1))
		}
	}
	check(b, h.Append(all))
	idx := make([]int, batch)
	seed := uint64(1)
	sample := func() {
		for i := range idx {
			seed = seed*6364136223846793005 + 1442695040888963407
			idx[i] = int(seed >> 33 % rows)
		}
	}
	dst := zeroRows(l, batch)
	store := func() {
		sample()
		check(b, h.ReadRows(idx, dst))
	}
	slices := func() {
		sample()
		for c, col := range all {
			rb := len(col) / rows
			for k, i := range idx {
				copy(dst[c][k*rb:(k+1)*rb], col[i*rb:(i+1)*rb])
			}
		}
	}
	sideBySide(b, 16, store, "ns/readrows", slices, "ns/slices")
}
