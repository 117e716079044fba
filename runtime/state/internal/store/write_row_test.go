package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestAppendRowsShortPath appends one row at a time across block
// boundaries (the short path of appendRows) on one head and the same rows
// in batches (the general path) on another, with snapshots taken between
// some steps (a shared tail takes the general path): rows, versions and
// the pool's bytes agree, and the short path allocates nothing per row.
func TestAppendRowsShortPath(t *testing.T) {
	p := must[*Pool](t)(NewPool(device.Host(), PoolOptions{BlockBytes: 256}))
	defer p.Close()
	one := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "one"))
	all := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "all"))
	rows := kvRows(100, 5)
	var snaps []*Snap
	for i := range 100 {
		row := [][]byte{rows[0][i*16 : (i+1)*16], rows[1][i*8 : (i+1)*8]}
		v := one.Version()
		check(t, one.Append(row))
		if one.Version() == v || one.Len() != i+1 {
			t.Fatalf("row %d: version %d -> %d, %d rows", i, v, one.Version(), one.Len())
		}
		if i%7 == 3 {
			snaps = append(snaps, must[*Snap](t)(one.Snapshot()))
		}
	}
	hold := must[*Snap](t)(all.Snapshot()) // a shared root: the general path
	check(t, all.Append(rows))
	check(t, hold.Release())
	if !equalCols(readAll(t, one), readAll(t, all)) {
		t.Fatal("rows appended one at a time differ from the batch")
	}
	for k, s := range snaps {
		if got, want := readAll(t, s), readAll(t, all); s.Len() != 7*k+4 || !equalCols(got, [][]byte{want[0][:len(got[0])], want[1][:len(got[1])]}) {
			t.Fatalf("snapshot %d: %d rows, or rows changed by later appends", k, s.Len())
		}
		check(t, s.Release())
	}
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.LogicalBytes != 2*100*24 {
		t.Fatalf("logical bytes %d, want %d", st.LogicalBytes, 2*100*24)
	}
	row := kvRows(1, 9)
	if n := testing.AllocsPerRun(200, func() { check(t, one.Append(row)) }); n != 0 {
		t.Fatalf("%v allocations per one-row append", n)
	}
}

// TestAppendRowsFaults fails each backend call of a one-row append that
// writes in place (after 37 rows) and of one that starts new blocks
// (after 32), and of a bulk append of 100 rows after 37 (the tail block,
// then new ones): the failed call changes neither the head nor the pool.
func TestAppendRowsFaults(t *testing.T) {
	for _, tc := range []struct{ rows, add int }{{37, 1}, {32, 1}, {37, 100}} {
		rows := tc.rows
		t.Run(fmt.Sprintf("%d+%d", rows, tc.add), func(t *testing.T) {
			for k := 0; ; k++ {
				fb := statetest.NewFaults(device.Host())
				p := must[*Pool](t)(NewPool(fb, PoolOptions{BlockBytes: 256}))
				h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "me"))
				check(t, h.Append(kvRows(rows, 1)))
				before, st, pst := readAll(t, h), h.Stats(), p.Stats()
				fb.Arm(statetest.OpAll, k)
				err := h.Append(kvRows(tc.add, 2))
				if !fb.Disarm() {
					check(t, err)
					if k == 0 {
						t.Fatal("the append made no backend call")
					}
					check(t, h.Release())
					check(t, p.Close())
					return
				}
				if !errors.Is(err, statetest.ErrInjected) {
					t.Fatalf("call %d: %v", k, err)
				}
				pst2 := p.Stats()
				if !equalCols(before, readAll(t, h)) || h.Stats() != st ||
					pst2.PhysicalBytes != pst.PhysicalBytes || pst2.LogicalBytes != pst.LogicalBytes || pst2.Live != pst.Live {
					t.Fatalf("call %d failed and changed the head or the pool", k)
				}
				if err := checkInvariants(p); err != nil {
					t.Fatal(err)
				}
				check(t, h.Append(kvRows(1, 3)))
				check(t, h.Release())
				check(t, p.Close())
			}
		})
	}
}

// TestAppendBulkShortPath appends batches of 1 to 100 rows (across tail
// blocks and whole leaves: the bulk short path, appendBulk), with Append
// and with AppendDevice (the rows copied to its spans), to one head, and
// the same batches to another whose every append takes the general
// path (a snapshot is held across it, so the root is shared), on pools
// of fixed and of row-sized blocks, with a window and with checkpoints:
// the rows, the versions, the reconstructions and the pool's bytes agree,
// and snapshots of the first head keep their rows while it goes on.
func TestAppendBulkShortPath(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  PoolOptions
		l    func() *Layout
	}{
		{"plain", PoolOptions{BlockBytes: 256}, func() *Layout { return kv(Append, 0, Keep) }},
		{"rowsized", PoolOptions{}, func() *Layout { return kv(Append, 0, Keep) }},
		{"window", PoolOptions{BlockBytes: 256}, func() *Layout { l := kv(Append, 0, Keep); l.Window = 150; return l }},
		{"checkpoints", PoolOptions{BlockBytes: 256}, func() *Layout {
			l := kv(Append, 0, Keep)
			l.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 3}
			return l
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, tc.opt)
			short := must[*Head](t)(p.NewHead(tc.l(), "short"))
			general := must[*Head](t)(p.NewHead(tc.l(), "general"))
			type kept struct {
				s    *Snap
				rows [][]byte
			}
			var snaps []kept
			var versions []Version
			for i, n := range []int{1, 5, 16, 17, 40, 3, 64, 100, 31, 33, 2, 96, 1, 70} {
				rows := kvRows(n, byte(i))
				appendTo := func(h *Head) {
					if i%3 == 2 {
						appendDevice(t, p, h, rows)
					} else {
						check(t, h.Append(rows))
					}
				}
				appendTo(short)
				hold := must[*Snap](t)(general.Snapshot())
				appendTo(general)
				check(t, hold.Release())
				if short.Len() != general.Len() || short.Version() != Version(i+1) || general.Version() != Version(i+1) {
					t.Fatalf("batch %d: %d rows at version %d, general path %d at %d", i, short.Len(), short.Version(), general.Len(), general.Version())
				}
				if got, want := readLive(t, short, tc.l()), readLive(t, general, tc.l()); !equalCols(got, want) {
					t.Fatalf("batch %d of %d rows: the short path's rows differ from the general path's", i, n)
				}
				if i%4 == 1 {
					s := must[*Snap](t)(short.Snapshot())
					snaps = append(snaps, kept{s, readLive(t, s, tc.l())})
				}
				versions = append(versions, short.Version())
			}
			for k, s := range snaps {
				if !equalCols(readLive(t, s.s, tc.l()), s.rows) {
					t.Fatalf("snapshot %d changed after later appends", k)
				}
				check(t, s.s.Release())
			}
			if tc.l().Checkpoint != nil {
				for _, v := range versions[len(versions)-6:] {
					a := must[*Snap](t)(short.At(v))
					b := must[*Snap](t)(general.At(v))
					if !equalCols(readLive(t, a, tc.l()), readLive(t, b, tc.l())) {
						t.Fatalf("version %d reconstructs differently", v)
					}
					check(t, a.Release())
					check(t, b.Release())
				}
			}
			if err := checkInvariants(p); err != nil {
				t.Fatal(err)
			}
			if a, b := short.Stats(), general.Stats(); a.LogicalBytes != b.LogicalBytes || a.PhysicalBytes != b.PhysicalBytes {
				t.Fatalf("stats %+v, general path %+v", a, b)
			}
			check(t, short.Release())
			check(t, general.Release())
		})
	}
}

// readLive returns the rows of x that its layout l keeps readable: all of
// them, or the last Window.
func readLive(t *testing.T, x reader, l *Layout) [][]byte {
	t.Helper()
	n := x.Len()
	from := 0
	if l.Window > 0 {
		from = max(0, n-l.Window)
	}
	dst := [][]byte{make([]byte, (n-from)*16), make([]byte, (n-from)*8)}
	check(t, x.Read(from, n, dst))
	return dst
}

// appendDevice appends rows (kv's two columns) with AppendDevice and
// copies them to the spans it returns, as a kernel would write them.
func appendDevice(t *testing.T, p *Pool, h *Head, rows [][]byte) {
	t.Helper()
	spans := must[[][]device.Span](t)(h.AppendDevice(len(rows[1]) / 8))
	for c, col := range spans {
		src := rows[c]
		for _, sp := range col {
			k := sp.Rows * []int{16, 8}[c]
			check(t, p.Backend().CopyHtoD(sp.Ptr, src[:k]))
			src = src[k:]
		}
	}
}

// TestAppendBulkNoMemory appends, on the bulk short path, more rows than a
// capped pool has room for: the append fails with ErrNoMemory and changes
// neither the head nor the pool, and one that fits goes on after it.
func TestAppendBulkNoMemory(t *testing.T) {
	p := newPool(t, PoolOptions{BlockBytes: 256, MaxBytes: 64 << 10})
	h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "me"))
	check(t, h.Append(kvRows(37, 1))) // a tail block in each column
	before, st, pst := readAll(t, h), h.Stats(), p.Stats()
	if err := h.Append(kvRows(4000, 2)); !errors.Is(err, ErrNoMemory) {
		t.Fatalf("an append past the cap: %v, want ErrNoMemory", err)
	}
	pst2 := p.Stats()
	if !equalCols(before, readAll(t, h)) || h.Stats() != st ||
		pst2.PhysicalBytes != pst.PhysicalBytes || pst2.LogicalBytes != pst.LogicalBytes {
		t.Fatal("the failed append changed the head or the pool")
	}
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
	rows := kvRows(100, 3)
	check(t, h.Append(rows))
	if got := readAll(t, h); !equalCols(got, concat(before, rows)) {
		t.Fatal("the append after the failed one stored other rows")
	}
	check(t, h.Release())
}
