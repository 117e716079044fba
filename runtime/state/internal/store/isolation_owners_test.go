package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// isoLayouts are layouts of several row widths, so that a row-sized pool
// (PoolOptions.BlockBytes 0) keeps several size classes.
func isoLayouts(g Growth, bound int, ret Retention) []*Layout {
	return []*Layout{
		{Type: "Narrow", Columns: []Column{{Name: "A", ElemSize: 1, Width: 16}}, Growth: g, Bound: bound, Retention: ret},
		{Type: "Wide", Columns: []Column{{Name: "A", ElemSize: 8, Width: 32}}, Growth: g, Bound: bound, Retention: ret},
		{Type: "Two", Columns: []Column{{Name: "K", ElemSize: 4, Width: 4}, {Name: "V", ElemSize: 8, Width: 40}}, Growth: g, Bound: bound, Retention: ret},
		{Type: "Odd", Columns: []Column{{Name: "A", ElemSize: 4, Width: 300}}, Growth: g, Bound: bound, Retention: ret},
	}
}

// isoOwnerByte is the byte owner o writes, nowhere else.
func isoOwnerByte(o int) byte { return byte(0x40 + o) }

// isoRows is n rows of l, every byte b.
func isoRows(l *Layout, n int, b byte) [][]byte {
	out := make([][]byte, len(l.Columns))
	for c, col := range l.Columns {
		out[c] = bytes.Repeat([]byte{b}, n*col.ElemSize*col.Width)
	}
	return out
}

// isoForeign returns a description of the first byte of cols that is
// neither zero nor mine, or "".
func isoForeign(cols [][]byte, mine byte) string {
	for c, col := range cols {
		for i, v := range col {
			if v != 0 && v != mine {
				return fmt.Sprintf("column %d byte %d is %#x (mine %#x)", c, i, v, mine)
			}
		}
	}
	return ""
}

func isoRead(x reader, l *Layout, from, to int) ([][]byte, error) {
	dst := make([][]byte, len(l.Columns))
	for c, col := range l.Columns {
		dst[c] = make([]byte, (to-from)*col.ElemSize*col.Width)
	}
	return dst, x.Read(from, to, dst)
}

// isoSpanBytes reads the bytes of spans through the backend: what a
// kernel handed them would find.
func isoSpanBytes(be device.Backend, l *Layout, spans [][]device.Span) ([][]byte, error) {
	out := make([][]byte, len(spans))
	for c, ss := range spans {
		rb := l.Columns[c].ElemSize * l.Columns[c].Width
		for _, s := range ss {
			buf := make([]byte, s.Rows*rb)
			if err := be.CopyDtoH(buf, s.Ptr); err != nil {
				return nil, err
			}
			out[c] = append(out[c], buf...)
		}
	}
	return out, nil
}

type isoHead struct {
	h     *Head
	l     *Layout
	owner int
	rows  int // rows written by the owner's host appends, all mine
	snaps []*Snap
}

// isoModel runs a random mix of owners' calls on p (a row-sized pool
// under a cap, over fb), with memset and alloc faults armed at random,
// checking after each call that no read of an owner finds another
// owner's byte, that a new mutable state reads as zeros, and the pool's
// invariants; at the end, with everything released, that nothing is in
// use.
func isoModel(t *testing.T, seed uint64, owners, steps int, fb *statetest.Faults, p *Pool, faults bool) {
	r := rand.New(rand.NewPCG(seed, 99))
	appendL := isoLayouts(Append, 0, Mandatory)
	mutL := isoLayouts(Mutable, 12, Mandatory)
	var heads []*isoHead
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d: "+format, append([]any{seed}, args...)...)
	}
	for step := range steps {
		armed := faults && r.IntN(4) == 0
		if armed {
			kinds := statetest.OpMemset
			if r.IntN(3) == 0 {
				kinds = statetest.OpAlloc
			}
			fb.Arm(kinds, r.IntN(3))
		}
		o := r.IntN(owners)
		mine := isoOwnerByte(o)
		owner := Owner(fmt.Sprint("o", o))
		op := r.IntN(8)
		var what string
		switch {
		case op == 0 || len(heads) < 2: // a new append state, written
			l := appendL[r.IntN(len(appendL))]
			what = "new append " + l.Type
			h, err := p.NewHead(l, owner)
			if err != nil {
				break
			}
			bh := &isoHead{h: h, l: l, owner: o}
			n := 1 + r.IntN(40)
			if err := h.Append(isoRows(l, n, mine)); err == nil {
				bh.rows = n
			} else if !errors.Is(err, ErrNoMemory) && !errors.Is(err, statetest.ErrInjected) {
				fail("append: %v", err)
			}
			heads = append(heads, bh)
		case op == 1: // a new mutable state reads zeros
			l := mutL[r.IntN(len(mutL))]
			what = "new mutable " + l.Type
			h, err := p.NewHead(l, owner)
			if err != nil {
				break
			}
			fb.Disarm()
			got, err := isoRead(h, l, 0, 12)
			if err != nil {
				fail("read: %v", err)
			}
			if s := isoForeign(got, 0); s != "" {
				fail("step %d: a new mutable state of owner %d does not read as zeros: %s", step, o, s)
			}
			check(t, h.Release())
		case op == 2: // a device append: the rows a kernel finds
			bh := heads[r.IntN(len(heads))]
			what = "append device"
			n := 1 + r.IntN(30)
			spans, err := bh.h.AppendDevice(n)
			fb.Disarm()
			if err != nil {
				if !errors.Is(err, ErrNoMemory) && !errors.Is(err, statetest.ErrInjected) {
					fail("append device: %v", err)
				}
				break
			}
			got, err := isoSpanBytes(p.b, bh.l, spans)
			if err != nil {
				fail("span bytes: %v", err)
			}
			if s := isoForeign(got, isoOwnerByte(bh.owner)); s != "" {
				fail("step %d: a device append of owner %d finds %s", step, bh.owner, s)
			}
			// The kernel writes them.
			for c, ss := range spans {
				rb := bh.l.Columns[c].ElemSize * bh.l.Columns[c].Width
				for _, sp := range ss {
					check(t, p.b.Memset(sp.Ptr, isoOwnerByte(bh.owner), sp.Rows*rb))
				}
			}
		case op == 3: // a host append to a head held
			bh := heads[r.IntN(len(heads))]
			what = "append"
			n := 1 + r.IntN(20)
			err := bh.h.Append(isoRows(bh.l, n, isoOwnerByte(bh.owner)))
			if err != nil && !errors.Is(err, ErrNoMemory) && !errors.Is(err, statetest.ErrInjected) {
				fail("append: %v", err)
			}
		case op == 4: // snapshot
			bh := heads[r.IntN(len(heads))]
			what = "snapshot"
			if s, err := bh.h.Snapshot(); err == nil {
				bh.snaps = append(bh.snaps, s)
			}
		case op == 5: // release a head and its snapshots
			i := r.IntN(len(heads))
			bh := heads[i]
			what = "release"
			fb.Disarm()
			for _, s := range bh.snaps {
				check(t, s.Release())
			}
			check(t, bh.h.Release())
			heads = append(heads[:i], heads[i+1:]...)
		case op == 6: // release one snapshot
			bh := heads[r.IntN(len(heads))]
			what = "release snap"
			if len(bh.snaps) > 0 {
				fb.Disarm()
				check(t, bh.snaps[0].Release())
				bh.snaps = bh.snaps[1:]
			}
		default: // branch and write the branch
			bh := heads[r.IntN(len(heads))]
			what = "branch"
			b, err := bh.h.Branch()
			if err != nil {
				break
			}
			nb := &isoHead{h: b, l: bh.l, owner: bh.owner}
			heads = append(heads, nb)
			_ = b.Append(isoRows(bh.l, 1+r.IntN(5), isoOwnerByte(bh.owner)))
		}
		fb.Disarm()
		// Every head and snapshot reads its owner's bytes or zeros.
		for _, bh := range heads {
			n := bh.h.Len()
			got, err := isoRead(bh.h, bh.l, 0, n)
			if err != nil {
				fail("step %d (%s): read: %v", step, what, err)
			}
			if s := isoForeign(got, isoOwnerByte(bh.owner)); s != "" {
				fail("step %d (%s): head of owner %d reads %s", step, what, bh.owner, s)
			}
			for _, s := range bh.snaps {
				got, err := isoRead(s, bh.l, 0, s.Len())
				if err != nil {
					fail("step %d: snapshot read: %v", step, err)
				}
				if d := isoForeign(got, isoOwnerByte(bh.owner)); d != "" {
					fail("step %d (%s): snapshot of owner %d reads %s", step, what, bh.owner, d)
				}
			}
		}
		if err := checkInvariants(p); err != nil {
			fail("step %d (%s): %v", step, what, err)
		}
	}
	for _, bh := range heads {
		for _, s := range bh.snaps {
			check(t, s.Release())
		}
		check(t, bh.h.Release())
	}
	if err := checkInvariants(p); err != nil {
		fail("at the end: %v", err)
	}
	if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 || st.Blocks != 0 {
		fail("everything released, the pool still counts %+v", st)
	}
}

// Owners take turns in a row-sized pool (four size
// classes) under a cap, with snapshots and branches holding blocks, and
// memset/alloc faults armed at random: no owner ever reads another's
// bytes (host reads, device-append spans), a new mutable state reads
// zeros, a failed call leaks nothing.
func TestIsolationOwnersModel(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			fb := statetest.NewFaults(device.Host())
			p, err := NewPool(fb, PoolOptions{MaxBytes: 96 << 10})
			check(t, err)
			defer p.Close()
			isoModel(t, seed, 4, 300, fb, p, seed%2 == 1)
		})
	}
}

// The same with one goroutine per owner, each on heads of its
// own, under a small cap: no owner reads another's bytes (-race).
func TestIsolationOwnersConcurrent(t *testing.T) {
	p := newPool(t, PoolOptions{MaxBytes: 72 << 10})
	const owners = 4
	var wg sync.WaitGroup
	errs := make(chan string, owners)
	for o := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(o), 3))
			mine := isoOwnerByte(o)
			owner := Owner(fmt.Sprint("o", o))
			appendL := isoLayouts(Append, 0, Mandatory)
			mutL := isoLayouts(Mutable, 8, Mandatory)
			for range 150 {
				if r.IntN(3) == 0 {
					l := mutL[r.IntN(len(mutL))]
					h, err := p.NewHead(l, owner)
					if err != nil {
						continue
					}
					got, err := isoRead(h, l, 0, 8)
					h.Release()
					if err != nil {
						errs <- err.Error()
						return
					}
					if s := isoForeign(got, 0); s != "" {
						errs <- fmt.Sprintf("a new mutable state of %s: %s", owner, s)
						return
					}
					continue
				}
				l := appendL[r.IntN(len(appendL))]
				h, err := p.NewHead(l, owner)
				if err != nil {
					continue
				}
				if err := h.Append(isoRows(l, 1+r.IntN(20), mine)); err != nil && !errors.Is(err, ErrNoMemory) {
					errs <- err.Error()
					return
				}
				spans, err := h.AppendDevice(1 + r.IntN(20))
				if err == nil {
					got, err := isoSpanBytes(p.b, l, spans)
					if err != nil {
						errs <- err.Error()
						return
					}
					if s := isoForeign(got, mine); s != "" {
						errs <- fmt.Sprintf("a device append of %s finds %s", owner, s)
						return
					}
					for c, ss := range spans {
						rb := l.Columns[c].ElemSize * l.Columns[c].Width
						for _, sp := range ss {
							p.b.Memset(sp.Ptr, mine, sp.Rows*rb)
						}
					}
				}
				got, err := isoRead(h, l, 0, h.Len())
				if err != nil {
					errs <- err.Error()
					return
				}
				if s := isoForeign(got, mine); s != "" {
					errs <- fmt.Sprintf("a head of %s reads %s", owner, s)
					return
				}
				h.Release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
}
