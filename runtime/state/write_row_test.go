package state

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
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
	check(t, all.Append(rows))
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
// writes in place (37 rows) and of one that starts new blocks (32 rows):
// the failed call changes neither the head nor the pool.
func TestAppendRowsFaults(t *testing.T) {
	for _, rows := range []int{37, 32} {
		t.Run(fmt.Sprint(rows), func(t *testing.T) {
			for k := 0; ; k++ {
				fb := newFaultBackend(device.Host())
				p := must[*Pool](t)(NewPool(fb, PoolOptions{BlockBytes: 256}))
				h := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), "me"))
				check(t, h.Append(kvRows(rows, 1)))
				before, st, pst := readAll(t, h), h.Stats(), p.Stats()
				fb.arm(opAll, k)
				err := h.Append(kvRows(1, 2))
				if !fb.disarm() {
					check(t, err)
					if k == 0 {
						t.Fatal("the append made no backend call")
					}
					check(t, h.Release())
					check(t, p.Close())
					return
				}
				if !errors.Is(err, errInjected) {
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
