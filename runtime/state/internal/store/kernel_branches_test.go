package store

import (
	"bytes"
	"fmt"
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
		p := keepPool(t, r)
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
		p := keepPool(t, r)
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

// TestKernelZeroRowDeviceWrites: AppendDevice(0) and WriteDevice(k, k) hand
// out no rows; the calls after them (RecordStream, Branch, a copying
// write, At, the release) neither fail nor leak an event.
func TestKernelZeroRowDeviceWrites(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		for _, ckpt := range []bool{false, true} {
			t.Run(fmt.Sprint("checkpoint=", ckpt), func(t *testing.T) {
				b, p := countedPool(t, r, PoolOptions{})
				l := keepLayout(false, Append)
				if ckpt {
					l.Checkpoint = &CheckpointPolicy{Every: 2, Keep: 4}
				}
				h := must[*Head](t)(p.NewHead(l, "s"))
				check(t, h.Append(oneRow(0x11)))
				check(t, h.RecordStream(st))
				v0 := h.Version()
				sp, err := h.AppendDevice(0)
				check(t, err)
				_ = sp
				check(t, h.RecordStream(st))
				c := must[*Head](t)(h.Branch())
				check(t, c.Append(oneRow(0x22)))
				check(t, h.Append(oneRow(0x33)))
				if ckpt {
					s := must[*Snap](t)(h.At(v0))
					keptRows(t, s, 0x11)
					check(t, s.Release())
				}
				m := must[*Head](t)(p.NewHead(keepLayout(false, Mutable), "s"))
				check(t, m.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
				_, err = m.WriteDevice(3, 3)
				check(t, err)
				check(t, m.RecordStream(st))
				check(t, m.Write(3, oneRow(0x44)))
				keptRows(t, h, 0x11, 0x33)
				keptRows(t, c, 0x11, 0x22)
				check(t, m.Release())
				check(t, c.Release())
				check(t, h.Release())
				check(t, st.Sync())
				eventsBalanced(t, b, p, "after every release")
				check(t, p.Close())
			})
		}
	})
}

// TestKernelConcurrentBranchesKernelEvents: branches of a head that share
// its kernel's events are written, branched, merged and released
// concurrently while the head makes new device writes (replacing its
// events) and calls: no race, no panic, every event closed once.
func TestKernelConcurrentBranchesKernelEvents(t *testing.T) {
	statetest.EachStreamRig(t, func(t *testing.T, r *statetest.StreamRig) {
		st := must[device.Stream](t)(r.Streams().NewStream())
		defer st.Close()
		st2 := must[device.Stream](t)(r.Streams().NewStream())
		defer st2.Close()
		b, p := countedPool(t, r, PoolOptions{})
		for iter := 0; iter < 20; iter++ {
			h := must[*Head](t)(p.NewHead(keepLayout(false, Mutable), "s"))
			check(t, h.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
			check(t, h.RecordStream(st2))
			fillOn(t, r, st, must[[][]device.Span](t)(h.WriteDevice(2, 4)), 0x5a)
			check(t, h.RecordStream(st))
			bs := make([]*Head, 6)
			for i := range bs {
				bs[i] = must[*Head](t)(h.Branch())
			}
			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for i, c := range bs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					switch i % 3 {
					case 0:
						errs <- c.Write(7, oneRow(byte(i)))
						sp, err := c.WriteDevice(5, 6)
						if err == nil {
							for _, s := range sp[0] {
								err = r.Kernels().Launch(st2, r.Fill, device.Dim3{}, device.Dim3{X: 64}, 0, s.Ptr, uint32(0x66), uint64(s.Rows*keepRowBytes))
							}
						}
						errs <- err
						errs <- c.RecordStream(st2)
					case 1:
						d, err := c.Branch()
						errs <- err
						if err == nil {
							errs <- d.Write(0, oneRow(0x99))
							errs <- c.Merge(d)
							errs <- d.Release()
						}
					case 2:
						errs <- c.Release()
					}
				}()
			}
			for k := 0; k < 3; k++ {
				sp, err := h.WriteDevice(6, 7)
				check(t, err)
				fillOn(t, r, st, sp, 0x70+byte(k))
				check(t, h.RecordStream(st))
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				check(t, err)
			}
			check(t, st.Sync())
			check(t, st2.Sync())
			keptRows(t, h, 0x11, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x72, 0x11)
			for i, c := range bs {
				if i%3 == 2 {
					continue
				}
				got := make([]byte, keepRows*keepRowBytes)
				check(t, c.Read(0, keepRows, [][]byte{got}))
				if got[2*keepRowBytes] != 0x5a || got[3*keepRowBytes] != 0x5a {
					t.Errorf("branch %d lost the kernel's rows", i)
				}
				check(t, c.Release())
			}
			check(t, h.Release())
		}
		done := make(chan struct{})
		go func() { p.WaitPending(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("WaitPending blocked")
		}
		eventsBalanced(t, b, p, "after every release")
		if ps := p.Stats(); ps.PhysicalBytes != 0 || ps.PendingBytes != 0 {
			t.Errorf("after every release: physical %d pending %d", ps.PhysicalBytes, ps.PendingBytes)
		}
		check(t, p.Close())
	})
}

// returnsWithin runs f in a goroutine and fails t unless it returns
// within 5s; release lets held work go in that case.
func returnsWithin(t *testing.T, r *statetest.StreamRig, what string, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		check(t, err)
	case <-time.After(5 * time.Second):
		r.Release()
		<-done
		t.Fatalf("%s waited for work queued after the kernel's next call", what)
	}
}

// TestKernelMergeDoesNotWaitLater: a child's kernel rows, merged into the
// head (the merge is the child's next call), then later work on the
// stream is held: a copy by the head, and by the child, waits only for
// the kernel.
func TestKernelMergeDoesNotWaitLater(t *testing.T) {
	r := statetest.HostStreamRig(t)
	p := keepPool(t, r)
	h, st := keepHead(t, r, p, false, Mutable)
	check(t, h.RecordStream(st))
	c := must[*Head](t)(h.Branch())
	defer c.Release()
	fillOn(t, r, st, must[[][]device.Span](t)(c.WriteDevice(2, 4)), 0x5a)
	check(t, h.Merge(c))
	r.Hold(t, st)
	returnsWithin(t, r, "the head's Write", func() error { return h.Write(0, oneRow(0x22)) })
	returnsWithin(t, r, "the child's Write", func() error { return c.Write(1, oneRow(0x33)) })
	r.Release()
	check(t, st.Sync())
	keptRows(t, h, 0x22, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
	keptRows(t, c, 0x11, 0x33, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
}

// TestKernelGroupBranchDoesNotWaitLater: a member's device write, the
// group's Branch as its next call, later work held: the branch's member
// copy waits only for the kernel.
func TestKernelGroupBranchDoesNotWaitLater(t *testing.T) {
	r := statetest.HostStreamRig(t)
	p := keepPool(t, r)
	g := must[*Group](t)(NewGroup(p, "s", keepLayout(false, Mutable), keepLayout(false, Append)))
	defer g.Release()
	m := g.Head(0)
	check(t, m.Write(0, [][]byte{bytes.Repeat([]byte{0x11}, keepRows*keepRowBytes)}))
	st := must[device.Stream](t)(r.Streams().NewStream())
	defer st.Close()
	check(t, m.RecordStream(st))
	fillOn(t, r, st, must[[][]device.Span](t)(m.WriteDevice(2, 4)), 0x5a)
	b := must[*Group](t)(g.Branch())
	defer b.Release()
	r.Hold(t, st)
	returnsWithin(t, r, "the branch's Write", func() error { return b.Head(0).Write(0, oneRow(0x22)) })
	returnsWithin(t, r, "the group's Write", func() error { return m.Write(0, oneRow(0x33)) })
	r.Release()
	check(t, st.Sync())
	keptRows(t, b.Head(0), 0x22, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
	keptRows(t, m, 0x33, 0x11, 0x5a, 0x5a, 0x11, 0x11, 0x11, 0x11)
}
