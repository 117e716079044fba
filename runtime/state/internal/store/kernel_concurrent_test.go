package store

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

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
