package store

import "testing"

// TestCalibrationSourcesOfItsClass: the blocks the cost model's
// calibration copies whole are of the class it measures. A delta's blocks
// are sized to its rows (allocDelta), smaller than the column's blocks, so
// a delta's column of the measured class may hold blocks of another: a
// copy of the class's bytes out of one would read past it (past the end
// of its slab, where it lies last).
func TestCalibrationSourcesOfItsClass(t *testing.T) {
	p := newPool(t, PoolOptions{MaxBytes: 1 << 20})
	l := kv(Append, 1<<20, Keep)
	l.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 4}
	h := must[*Head](t)(p.NewHead(l, "a"))
	defer h.Release()
	for i := range 40 {
		check(t, h.Append(kvRows(1+i%3, byte(i))))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, cls := range h.classes {
		k := newCalibrator(p, h, cls)
		var m CostModel
		k.measureTree(&m)
		k.alone = k.nsrc
		k.sources()
		for i, s := range k.srcs[:k.nsrc] {
			if s[0].Class() != cls {
				t.Errorf("source %d: a block of %d bytes, measuring the class of %d", i, s[0].Bytes(), cls.Bytes())
			}
		}
		for _, b := range k.run() {
			if b.Class() != cls {
				t.Errorf("run: a block of %d bytes, measuring the class of %d", b.Bytes(), cls.Bytes())
			}
		}
	}
}
