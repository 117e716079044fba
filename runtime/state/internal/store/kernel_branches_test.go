package store

import (
	"bytes"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// Many holders of a kernel's rows: branches and groups share the events
// after the kernels, and each copies, merges or releases in its turn.

// TestKernelRowsManyBranches: a head's device write (a kernel
// on a recorded stream) is shared by many branches, which then, at once,
// copy the rows on write, snapshot, merge into the head or are released,
// in random orders. Every branch keeps the kernel's rows; nothing panics
// (a wrapper closed once too many would be recycled under another
// holder).
func TestKernelRowsManyBranches(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
		defer p.Close()
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		st2 := must[device.Stream](t)(r.Streams().NewStream())
		defer st2.Close()
		rng := rand.New(rand.NewSource(7))
		for iter := 0; iter < 40; iter++ {
			h := must[*Head](t)(p.NewHead(keepLayout(false, Mutable), "s"))
			check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
			check(t, h.RecordStream(st2))
			v := byte(0x40 + iter)
			r.Hold(t, st)
			time.AfterFunc(time.Duration(rng.Intn(4))*time.Millisecond, r.Release)
			fillOn(t, r, st, must[[][]device.Span](t)(h.WriteDevice(2, 4)), v)
			check(t, h.RecordStream(st))
			n := 6
			bs := make([]*Head, n)
			for i := range bs {
				bs[i] = must[*Head](t)(h.Branch())
			}
			want := []byte{0x11, 0x11, v, v, 0x11, 0x11, 0x11, 0x11}
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i, b := range bs {
				op := rng.Intn(4)
				wg.Add(1)
				go func() {
					defer wg.Done()
					var err error
					switch op {
					case 0:
						err = b.Write(7, oneRow(byte(i)))
					case 1:
						var s *Snap
						if s, err = b.Snapshot(); err == nil {
							err = s.Release()
						}
					case 2:
						c, e := b.Branch()
						if err = e; err == nil {
							err = c.Write(0, oneRow(0x99))
							c.Release()
						}
					}
					errs <- err
				}()
			}
			check(t, h.Read(0, 1, [][]byte{make([]byte, keepRowBytes)}))
			wg.Wait()
			close(errs)
			for err := range errs {
				check(t, err)
			}
			check(t, st.Sync())
			for _, b := range bs {
				got := make([]byte, keepRows*keepRowBytes)
				check(t, b.Read(0, keepRows, [][]byte{got}))
				if !bytes.Equal(got[2*keepRowBytes:4*keepRowBytes], bytes.Repeat([]byte{v}, 2*keepRowBytes)) {
					t.Fatalf("a branch lost the kernel's rows: %x", got[2*keepRowBytes])
				}
			}
			keptRows(t, h, want...)
			if rng.Intn(2) == 0 {
				c := bs[rng.Intn(n)]
				check(t, h.Merge(c))
				check(t, h.Write(1, oneRow(0x22)))
				got := make([]byte, 4*keepRowBytes)
				check(t, h.Read(0, 4, [][]byte{got}))
				if !bytes.Equal(got[2*keepRowBytes:], bytes.Repeat([]byte{v}, 2*keepRowBytes)) {
					t.Fatal("the head lost the kernel's rows after a merge")
				}
			}
			rng.Shuffle(n, func(i, j int) { bs[i], bs[j] = bs[j], bs[i] })
			for _, b := range bs {
				check(t, b.Release())
			}
			check(t, h.Release())
		}
		check(t, st.Sync())
		if ps := p.Stats(); ps.PhysicalBytes != 0 {
			t.Errorf("after every release: %+v", ps)
		}
	})
}

// TestKernelRowsGroup: a group's member writes rows by a held kernel;
// the group branches, the branch's member copies the block on write, the
// branch's own member kernel is merged back into the group, and the
// group rolls back and is released: every version keeps the kernels'
// rows, and every event is closed (the pool drains).
func TestKernelRowsGroup(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		p := must[*Pool](t)(NewPool(r.Backend, PoolOptions{BlockBytes: keepRows * keepRowBytes}))
		defer p.Close()
		g := must[*Group](t)(NewGroup(p, "s", keepLayout(false, Mutable), keepLayout(false, Append)))
		m := g.Head(0)
		check(t, m.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
		check(t, g.Head(1).Append(oneRow(0x01)))
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		hold := func() {
			r.Hold(t, st)
			time.AfterFunc(30*time.Millisecond, r.Release)
		}
		hold()
		fillOn(t, r, st, must[[][]device.Span](t)(m.WriteDevice(2, 4)), 0x5a)
		check(t, m.RecordStream(st))
		cut := must[*GroupSnap](t)(g.Snapshot())
		b := must[*Group](t)(g.Branch())
		check(t, b.Head(0).Write(0, oneRow(0x22))) // copies the block the kernel writes
		hold()
		fillOn(t, r, st, must[[][]device.Span](t)(b.Head(0).WriteDevice(5, 6)), 0x6b)
		check(t, b.Head(0).RecordStream(st))
		check(t, g.Merge(b))
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); check(t, b.Head(0).Write(7, oneRow(0x33))) }()
		check(t, g.Head(0).Write(1, oneRow(0x44))) // copies: b shares the block
		wg.Wait()
		check(t, st.Sync())
		keptRows(t, g.Head(0), 0x22, 0x44, 0x5a, 0x5a, 0x11, 0x6b, 0x11, 0x11)
		keptRows(t, b.Head(0), 0x22, 0x11, 0x5a, 0x5a, 0x11, 0x6b, 0x11, 0x33)
		check(t, b.Release())
		check(t, g.Rollback(cut))
		check(t, g.Head(0).Write(0, oneRow(0x55)))
		keptRows(t, g.Head(0), 0x55, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
		check(t, cut.Release())
		check(t, g.Release())
		if ps := p.Stats(); ps.PhysicalBytes != 0 {
			t.Errorf("after every release: %+v", ps)
		}
	})
}
