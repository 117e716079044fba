package store

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestHostCopiesMatchTheBackend: a pool over the host backend copies rows
// with the built-in copy (Block.Host); one over a wrapper of it, which is
// not the host backend, makes the backend's calls. The same appends,
// writes, snapshots, rollbacks, reads and gathers read the same rows on
// both.
func TestHostCopiesMatchTheBackend(t *testing.T) {
	c := statetest.NewCounts(device.Host())
	direct := must[*Pool](t)(NewPool(device.Host(), PoolOptions{BlockBytes: 256}))
	called := must[*Pool](t)(NewPool(c, PoolOptions{BlockBytes: 256}))
	cp := kv(Mutable, 64, Keep)
	cp.Checkpoint = &CheckpointPolicy{Every: 5, Keep: 3} // deltas, and At rebuilding from them
	for _, l := range []*Layout{kv(Append, 0, Keep), kv(Mutable, 64, Keep), cp} {
		rng := rand.New(rand.NewPCG(1, 2))
		hs := [2]*Head{must[*Head](t)(direct.NewHead(l, "me")), must[*Head](t)(called.NewHead(l, "me"))}
		var snaps [2]*Snap
		var vers [2][]Version
		for step := range 300 {
			op, n, seed := rng.IntN(5), 1+rng.IntN(40), byte(step)
			for i, h := range hs {
				switch {
				case op == 0 && snaps[i] == nil:
					snaps[i] = must[*Snap](t)(h.Snapshot())
				case op == 1 && snaps[i] != nil:
					check(t, h.Rollback(snaps[i]))
					check(t, snaps[i].Release())
					snaps[i] = nil
					vers[i] = vers[i][:0] // versions of the line left
				case l.Growth == Append && h.Len()+n <= 1000:
					check(t, h.Append(kvRows(n, seed)))
				}
			}
			if l.Growth == Mutable && op > 1 {
				k := min(n, 64)
				at := rng.IntN(64 - k + 1)
				for i, h := range hs {
					check(t, h.Write(at, kvRows(k, seed)))
					vers[i] = append(vers[i], h.Version())
				}
			}
			if l.Checkpoint != nil && len(vers[0]) > 0 && op == 4 {
				j := len(vers[0]) - 1 - rng.IntN(min(len(vers[0]), 8))
				var got [2][][]byte
				for i, h := range hs {
					at := must[*Snap](t)(h.At(vers[i][j]))
					got[i] = readAll(t, at)
					check(t, at.Release())
				}
				if !equalCols(got[0], got[1]) {
					t.Fatalf("step %d: the pools rebuild other rows", step)
				}
			}
			if hs[0].Len() != hs[1].Len() {
				t.Fatalf("%s step %d: lengths %d and %d", l.Growth, step, hs[0].Len(), hs[1].Len())
			}
			if !equalCols(readAll(t, hs[0]), readAll(t, hs[1])) {
				t.Fatalf("%s step %d: the pools read other rows", l.Growth, step)
			}
			if n := hs[0].Len(); n > 0 {
				idx := []int{rng.IntN(n), rng.IntN(n), n - 1}
				var got [2][][]byte
				for i, h := range hs {
					got[i] = [][]byte{make([]byte, 3*16), make([]byte, 3*8)}
					check(t, h.ReadRows(idx, got[i]))
				}
				if !equalCols(got[0], got[1]) {
					t.Fatalf("%s step %d: the pools gather other rows", l.Growth, step)
				}
			}
		}
		for i, h := range hs {
			if snaps[i] != nil {
				check(t, snaps[i].Release())
			}
			check(t, h.Release())
		}
	}
	if c.Calls("CopiesHtoD")+c.Calls("CopyHtoD") == 0 || c.Calls("CopiesDtoH")+c.Calls("CopyDtoH") == 0 {
		t.Error("the wrapped backend saw no copies")
	}
	check(t, direct.Close())
	check(t, called.Close())
}

// TestHostWriteCoversInPlace: on host memory a write that covers a block
// the head holds alone writes it in place, where elsewhere it takes a new
// block; a snapshot's block is copied on write as before, and one that
// queued stream work may read keeps its rows and gets a new block too.
func TestHostWriteCoversInPlace(t *testing.T) {
	b := device.Host()
	defer b.Close()
	c := statetest.NewCounts(device.Host())
	for _, host := range []bool{true, false} {
		var p *Pool
		if host {
			p = must[*Pool](t)(NewPool(b, PoolOptions{}))
		} else {
			p = must[*Pool](t)(NewPool(c, PoolOptions{}))
		}
		h := must[*Head](t)(p.NewHead(rec(Invalidate), "me"))
		ptr := func() device.Ptr {
			sp := must[[][]device.Span](t)(h.Spans(0, h.Len()))
			return sp[0][0].Ptr
		}
		check(t, h.Write(0, recRow(1)))
		before := ptr()
		check(t, h.Write(0, recRow(2)))
		if moved := ptr() != before; moved == host {
			t.Errorf("host %v: the covering write moved the block: %v", host, moved)
		}
		s := must[*Snap](t)(h.Snapshot())
		before = ptr()
		check(t, h.Write(0, recRow(3)))
		if ptr() == before {
			t.Errorf("host %v: a write over a snapshot's block wrote it in place", host)
		}
		if got := readRec(t, s); !bytes.Equal(got, recRow(2)[0]) {
			t.Errorf("host %v: the snapshot reads other rows", host)
		}
		check(t, s.Release())
		if host {
			st := must[device.Stream](t)(b.(device.Streams).NewStream())
			check(t, h.RecordStream(st))
			before = ptr()
			check(t, h.Write(0, recRow(4)))
			if ptr() == before {
				t.Error("a write over a block queued work reads wrote it in place")
			}
			check(t, st.Close())
		}
		if got := readRec(t, h); !bytes.Equal(got, recRow(map[bool]byte{true: 4, false: 3}[host])[0]) {
			t.Errorf("host %v: the head reads other rows", host)
		}
		check(t, h.Release())
		check(t, p.Close())
	}
}
