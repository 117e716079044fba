package store

import (
	"errors"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// Host-memory writes in place against groups, windows, BlockRows and
// eviction with the host tier, each on the host backend and on a wrapper
// of it (the backend's calls), with the same outcome.

func eachHostPool(t *testing.T, opt PoolOptions, f func(t *testing.T, p *Pool)) {
	for _, wrapped := range []bool{false, true} {
		name := "host"
		var b device.Backend = device.Host()
		if wrapped {
			name, b = "wrapped", statetest.NewCounts(device.Host())
		}
		t.Run(name, func(t *testing.T) {
			p := must[*Pool](t)(NewPool(b, opt))
			f(t, p)
			if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 {
				t.Errorf("after releasing everything: %+v", st)
			}
			check(t, p.Close())
		})
	}
}

// TestHostGroupCutKeepsRowsOverMemberWrites: a group's cut holds each
// member's rows; member writes covering their blocks after it leave the
// cut as it was, a rollback to it reads its rows, and writes after the
// rollback (blocks the members hold alone again once the cut is
// released) land.
func TestHostGroupCutKeepsRowsOverMemberWrites(t *testing.T) {
	eachHostPool(t, PoolOptions{BlockBytes: 256}, func(t *testing.T, p *Pool) {
		g := must[*Group](t)(NewGroup(p, "s", kv(Mutable, 64, Keep), rec(Keep)))
		kvh, rh := g.Head(0), g.Head(1)
		check(t, kvh.Write(0, kvRows(64, 1)))
		check(t, rh.Write(0, recRow(1)))
		check(t, kvh.Write(0, kvRows(64, 2))) // in place on host
		check(t, rh.Write(0, recRow(2)))
		cut := must[*GroupSnap](t)(g.Snapshot())
		check(t, kvh.Write(0, kvRows(64, 3)))
		check(t, rh.Write(0, recRow(3)))
		check(t, kvh.Write(0, kvRows(64, 4))) // own blocks now: in place
		check(t, rh.Write(0, recRow(4)))
		if !equalCols(readAll(t, cut.Snap(0)), kvRows(64, 2)) || string(readRec(t, cut.Snap(1))) != string(recRow(2)[0]) {
			t.Fatal("the cut changed")
		}
		check(t, g.Rollback(cut))
		if !equalCols(readAll(t, kvh), kvRows(64, 2)) || string(readRec(t, rh)) != string(recRow(2)[0]) {
			t.Fatal("the rollback reads other rows")
		}
		check(t, kvh.Write(0, kvRows(64, 5)))
		if !equalCols(readAll(t, cut.Snap(0)), kvRows(64, 2)) {
			t.Fatal("the cut changed after the rollback")
		}
		check(t, cut.Release())
		check(t, kvh.Write(0, kvRows(64, 6)))
		check(t, rh.Write(0, recRow(6)))
		if !equalCols(readAll(t, kvh), kvRows(64, 6)) || string(readRec(t, rh)) != string(recRow(6)[0]) {
			t.Fatal("the members read other rows")
		}
		check(t, g.Release())
	})
}

// TestHostWindowReadsAndGathers: a window state appended in chunks of
// every size, read and gathered over its readable rows (readHost, the
// gather's host path) at each step, with a snapshot that keeps its rows.
func TestHostWindowReadsAndGathers(t *testing.T) {
	eachHostPool(t, PoolOptions{BlockBytes: 256}, func(t *testing.T, p *Pool) {
		l := kv(Append, 0, Keep)
		l.Window = 40
		h := must[*Head](t)(p.NewHead(l, "me"))
		ref := [][]byte{{}, {}}
		var s *Snap
		var sFrom, sTo int
		var sWant [][]byte
		read := func(x interface {
			Read(int, int, [][]byte) error
		}, from, to int) [][]byte {
			dst := [][]byte{make([]byte, (to-from)*16), make([]byte, (to-from)*8)}
			check(t, x.Read(from, to, dst))
			return dst
		}
		for i := range 60 {
			k := 1 + (i*13)%39
			rows := kvRows(k, byte(i))
			check(t, h.Append(rows))
			ref = concat(ref, rows)
			n := h.Len()
			lo := h.Oldest()
			if lo != max(0, n-40) {
				t.Fatalf("step %d: oldest %d of %d rows", i, lo, n)
			}
			for from := lo; from < n; from += 7 {
				if got := read(h, from, n); !equalCols(got, [][]byte{ref[0][from*16 : n*16], ref[1][from*8 : n*8]}) {
					t.Fatalf("step %d: read [%d, %d)", i, from, n)
				}
			}
			idx := []int{n - 1, lo, (lo + n) / 2}
			g := [][]byte{make([]byte, 3*16), make([]byte, 3*8)}
			check(t, h.ReadRows(idx, g))
			for j, r := range idx {
				if string(g[0][j*16:(j+1)*16]) != string(ref[0][r*16:(r+1)*16]) || string(g[1][j*8:(j+1)*8]) != string(ref[1][r*8:(r+1)*8]) {
					t.Fatalf("step %d: gather of row %d", i, r)
				}
			}
			if i%10 == 3 {
				if s != nil {
					check(t, s.Release())
				}
				s = must[*Snap](t)(h.Snapshot())
				sFrom, sTo = lo, n
				sWant = read(s, sFrom, sTo)
			}
			if s != nil && !equalCols(read(s, sFrom, sTo), sWant) {
				t.Fatalf("step %d: the snapshot changed", i)
			}
		}
		check(t, s.Release())
		check(t, h.Release())
	})
}

// TestHostBlockRowsCoveringWrites: a layout of few rows a block
// (BlockRows 3), columns of different widths, writes covering some
// blocks whole and others in part, with branches between.
func TestHostBlockRowsCoveringWrites(t *testing.T) {
	eachHostPool(t, PoolOptions{}, func(t *testing.T, p *Pool) {
		l := kv(Mutable, 20, Keep)
		l.BlockRows = 3
		h := must[*Head](t)(p.NewHead(l, "me"))
		ref := kvRows(20, 0)
		check(t, h.Write(0, ref))
		var branches []*Head
		var brefs [][][]byte
		for i := range 30 {
			at, n := (i*7)%20, 1+(i*5)%(20-(i*7)%20)
			rows := kvRows(n, byte(i+1))
			check(t, h.Write(at, rows))
			copy(ref[0][at*16:], rows[0])
			copy(ref[1][at*8:], rows[1])
			if i%6 == 0 {
				branches = append(branches, must[*Head](t)(h.Branch()))
				brefs = append(brefs, [][]byte{append([]byte(nil), ref[0]...), append([]byte(nil), ref[1]...)})
			}
			for k, b := range branches {
				if !equalCols(readAll(t, b), brefs[k]) {
					t.Fatalf("step %d: branch %d changed", i, k)
				}
			}
			if !equalCols(readAll(t, h), ref) {
				t.Fatalf("step %d: the head reads other rows", i)
			}
		}
		for _, b := range branches {
			check(t, b.Release())
		}
		check(t, h.Release())
	})
}

// TestHostEvictedOptionalThenWrite: optional heads under a pool cap and a
// host tier: writes covering blocks of a head brought back from the tier
// (or evicted and rebuilt empty: ErrEvicted) read their rows.
func TestHostEvictedOptionalThenWrite(t *testing.T) {
	eachHostPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 256 * 24, HostTier: 256 * 64}, func(t *testing.T, p *Pool) {
		l := kv(Mutable, 64, Keep)
		l.Retention = Optional
		var hs []*Head
		var refs [][][]byte
		for i := range 6 {
			h, err := p.NewHead(l, "me")
			check(t, err)
			rows := kvRows(64, byte(i))
			if err := h.Write(0, rows); err != nil && !errors.Is(err, ErrNoMemory) {
				t.Fatal(err)
			} else if err != nil {
				rows = kvRows(64, 0)
				rows[0], rows[1] = make([]byte, 64*16), make([]byte, 64*8)
			}
			hs, refs = append(hs, h), append(refs, rows)
		}
		for round := range 4 {
			for i, h := range hs {
				rows := kvRows(64, byte(10*round+i))
				err := h.Write(0, rows)
				switch {
				case errors.Is(err, ErrEvicted) || errors.Is(err, ErrNoMemory):
					continue
				case err != nil:
					t.Fatal(err)
				}
				refs[i] = rows
				got := [][]byte{make([]byte, 64*16), make([]byte, 64*8)}
				if err := h.Read(0, 64, got); errors.Is(err, ErrEvicted) {
					continue
				} else {
					check(t, err)
				}
				if !equalCols(got, refs[i]) {
					t.Fatalf("round %d head %d reads other rows", round, i)
				}
			}
		}
		for _, h := range hs {
			check(t, h.Release())
		}
	})
}
