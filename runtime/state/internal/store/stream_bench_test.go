package store

import (
	"slices"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
)

// BenchmarkReleaseRecordStream: a head of four 4 KiB blocks created,
// written and released, with RecordStream on an idle host stream before the
// release (an event recorded per release, the blocks handed back by a
// goroutine once it completes) and without, alternately in rounds of 64
// cycles. The ratio metric is the median over rounds of the recorded
// round's time over the plain one's: what RecordStream adds to a handle's
// life on the release path.
func BenchmarkReleaseRecordStream(b *testing.B) {
	be := device.Host()
	defer be.Close()
	p, err := NewPool(be, PoolOptions{BlockBytes: 4096})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	st, err := be.(device.Streams).NewStream()
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	l := &Layout{Type: "Rows", Columns: []Column{{Name: "B", ElemSize: 1, Width: 4096}}, Growth: Append}
	rows := [][]byte{make([]byte, 4*4096)}
	cycle := func(recorded bool) {
		h, err := p.NewHead(l, "a")
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Append(rows); err != nil {
			b.Fatal(err)
		}
		if recorded {
			if err := h.RecordStream(st); err != nil {
				b.Fatal(err)
			}
		}
		if err := h.Release(); err != nil {
			b.Fatal(err)
		}
	}
	round := func(recorded bool) time.Duration {
		start := time.Now()
		for range 64 {
			cycle(recorded)
		}
		d := time.Since(start)
		p.WaitPending() // every round starts with the blocks free
		return d
	}
	var ratios []float64
	for i := 0; b.Loop(); i++ {
		var plain, rec time.Duration
		if i%2 == 0 {
			plain, rec = round(false), round(true)
		} else {
			rec, plain = round(true), round(false)
		}
		ratios = append(ratios, float64(rec)/float64(plain))
	}
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "ratio")
}

// BenchmarkAppendAsync: 256 KiB appended on a host stream by AppendAsync
// (staging copy, append, queued copies, events) against the backend's own
// CopyHtoDAsync of the same bytes from page-locked memory to one
// allocation, each waited for on the stream, alternately in rounds. The
// ratio metric is the median of AppendAsync's time over the copy's.
func BenchmarkAppendAsync(b *testing.B) {
	l := &Layout{Type: "Rows", Columns: []Column{{Name: "B", ElemSize: 1, Width: 1024}}}
	n := benchAppendAsync(b, PoolOptions{BlockBytes: 64 << 10}, l, 256)
	b.SetBytes(8 * int64(n))
}
