package store

import (
	"errors"
	"sync"
	"testing"
)

// TestHostSnapshotReadersWhileHeadWritesInPlace: goroutines read and
// gather from snapshots (and At versions) while the head writes covering
// and partial writes on host memory, takes new snapshots and releases old
// ones: a snapshot reads the rows it was taken at, always. Run with
// -race.
func TestHostSnapshotReadersWhileHeadWritesInPlace(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256})
	l := kv(Mutable, 64, Keep)
	l.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 2}
	h := must[*Head](t)(p.NewHead(l, "me"))
	defer h.Release()
	check(t, h.Write(0, kvRows(64, 0)))
	type taken struct {
		s    *Snap
		want [][]byte
	}
	snaps := make(chan taken, 4)
	var wg sync.WaitGroup
	var bad sync.Once
	fail := func(format string, args ...any) { bad.Do(func() { t.Errorf(format, args...) }) }
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tk := range snaps {
				for range 20 {
					n := tk.s.Len()
					dst := [][]byte{make([]byte, n*16), make([]byte, n*8)}
					if err := tk.s.Read(0, n, dst); err != nil {
						fail("read: %v", err)
						return
					}
					if !equalCols(dst, tk.want) {
						fail("a snapshot changed while the head wrote")
					}
					g := [][]byte{make([]byte, 2*16), make([]byte, 2*8)}
					if err := tk.s.ReadRows([]int{63, 5}, g); err != nil {
						fail("gather: %v", err)
						return
					}
					if string(g[0][:16]) != string(tk.want[0][63*16:64*16]) || string(g[1][8:]) != string(tk.want[1][5*8:6*8]) {
						fail("a snapshot's gather changed while the head wrote")
					}
				}
				if err := tk.s.Release(); err != nil {
					fail("release: %v", err)
				}
			}
		}()
	}
	cur := kvRows(64, 0)
	for i := range 400 {
		seed := byte(i + 1)
		switch i % 3 {
		case 0: // every block whole
			check(t, h.Write(0, kvRows(64, seed)))
			cur = kvRows(64, seed)
		case 1: // keys' block 1 whole and values' block 0 in part
			rows := kvRows(16, seed)
			check(t, h.Write(16, rows))
			copy(cur[0][16*16:], rows[0])
			copy(cur[1][16*8:], rows[1])
		default: // a few rows
			rows := kvRows(3, seed)
			check(t, h.Write(30, rows))
			copy(cur[0][30*16:], rows[0])
			copy(cur[1][30*8:], rows[1])
		}
		if i%5 == 0 {
			s := must[*Snap](t)(h.Snapshot())
			snaps <- taken{s, [][]byte{append([]byte(nil), cur[0]...), append([]byte(nil), cur[1]...)}}
		}
		if i%7 == 0 {
			v := h.Version()
			at, err := h.At(v)
			if errors.Is(err, ErrNotRetained) {
				continue
			}
			check(t, err)
			snaps <- taken{at, [][]byte{append([]byte(nil), cur[0]...), append([]byte(nil), cur[1]...)}}
		}
	}
	close(snaps)
	wg.Wait()
	if !equalCols(readAll(t, h), cur) {
		t.Error("the head reads other rows")
	}
}
