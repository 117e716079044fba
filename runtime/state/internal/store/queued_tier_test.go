package store

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// A head in the host tier is prefetched with the tier's stream
// held (copies back queued), then AppendAsync on another stream and
// Release at once; another owner allocates: the blocks the return
// copies write must stay pending, and the other owner's rows intact.
func TestQueuedTierReturnHeldThenAsyncRelease(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256, MaxBytes: 8 * 256, PendingWait: 20 * time.Millisecond, HostTier: 64 << 10}))
	t.Cleanup(func() { p.Close() })
	a := must[*Head](t)(p.NewHead(wide("A", Optional), "a"))
	fill(t, a, 3, 1)
	if _, moved, err := (tierHead{a}).moveOut(); !moved || err != nil {
		t.Fatalf("move out: %v %v", moved, err)
	}
	open := r.hold(t, p.tier.stream())
	check(t, a.Prefetch())
	st := r.stream(t)
	check(t, a.AppendAsync(st, wideRow(0x44)))
	dst := make([]byte, 4*256)
	check(t, a.ReadAsync(st, 0, 4, [][]byte{dst}))
	check(t, a.Release())
	b := must[*Head](t)(p.NewHead(wide("B", Mandatory), "b"))
	var mb []byte
	for i := 0; i < 8; i++ {
		if err := b.Append(wideRow(byte(0xB0 + i))); err != nil {
			break
		}
		mb = append(mb, wideRow(byte(0xB0 + i))[0]...)
	}
	t.Logf("b got %d rows", len(mb)/256)
	open()
	check(t, st.Sync())
	if want := catWide(wideRow(1), wideRow(2), wideRow(3), wideRow(0x44)); !bytes.Equal(dst, want) {
		t.Errorf("ReadAsync after the return reads %x %x %x %x", dst[0], dst[256], dst[512], dst[768])
	}
	if !bytes.Equal(readWide(t, b), mb) {
		t.Error("b's rows changed under the tier's return copies")
	}
	check(t, b.Release())
	qwLeaks(t, p)
}

// Eviction of an optional head whose stream work finishes
// during the pool's PendingWait: it is evicted (or moved to the tier),
// the other owner's rows are right, the victim answers ErrEvicted or its
// rows, and nothing leaks.
func TestQueuedEvictAfterWorkDrains(t *testing.T) {
	for _, tier := range []int64{0, 64 << 10} {
		t.Run(fmt.Sprint("tier", tier), func(t *testing.T) {
			r := newQueuedRig(t)
			p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256, MaxBytes: 8 * 256, PendingWait: 2 * time.Second, HostTier: tier}))
			t.Cleanup(func() { p.Close() })
			st := r.stream(t)
			a := must[*Head](t)(p.NewHead(wide("A", Optional), "a"))
			fill(t, a, 2, 1)
			open := r.hold(t, st)
			check(t, a.AppendAsync(st, [][]byte{bytes.Repeat([]byte{0x33}, 3*256)}))
			openAfter(open, 30*time.Millisecond)
			b := must[*Head](t)(p.NewHead(wide("B", Mandatory), "b"))
			var mb []byte
			for i := 0; i < 7; i++ {
				if err := b.Append(wideRow(byte(0xB0 + i))); err != nil {
					t.Logf("b append %d: %v", i, err)
					break
				}
				mb = append(mb, wideRow(byte(0xB0 + i))[0]...)
			}
			s := p.Stats()
			t.Logf("b %d rows, evictions %d tier out %d", len(mb)/256, s.Evictions, s.TierOut)
			check(t, st.Sync())
			if !bytes.Equal(readWide(t, b), mb) {
				t.Error("b's rows changed")
			}
			check(t, b.Release())
			want := append(catWide(wideRow(1), wideRow(2)), bytes.Repeat([]byte{0x33}, 3*256)...)
			got := make([]byte, 5*256)
			if err := a.Read(0, 5, [][]byte{got}); err == nil {
				if !bytes.Equal(got, want) {
					t.Errorf("a reads %x %x %x", got[0], got[256], got[512])
				}
			} else if !errors.Is(err, ErrEvicted) {
				t.Error(err)
			}
			check(t, a.Release())
			qwLeaks(t, p)
		})
	}
}

// Goroutines, each with its own head and stream, append async,
// snapshot, roll back, branch and merge, under a pool with a cap and
// optional heads being evicted; each checks its model. Run with -race.
func TestQueuedConcurrentAsyncModel(t *testing.T) {
	r := newQueuedRig(t)
	p := must[*Pool](t)(NewPool(r.b, PoolOptions{BlockBytes: 256, MaxBytes: 64 * 256, PendingWait: 50 * time.Millisecond, HostTier: 16 << 10}))
	t.Cleanup(func() { p.Close() })
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 4; g++ {
		st := r.stream(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := kv(Append, 0, Invalidate)
			if g%2 == 1 {
				l = kv(Append, 0, Keep)
				l.Retention = Optional
			}
			h, err := p.NewHead(l, Owner(fmt.Sprint("o", g)))
			if err != nil {
				errs <- err
				return
			}
			defer h.Release()
			m := qwModel(kvRows(0, 0))
			var snap *Snap
			var sm qwModel
			for i := 0; i < 60; i++ {
				seed := byte(g*64 + i)
				switch i % 6 {
				case 0, 1, 2:
					if err := h.AppendAsync(st, kvRows(1+i%5, seed)); err != nil {
						if errors.Is(err, ErrEvicted) {
							return
						}
						if errors.Is(err, ErrNoMemory) {
							continue
						}
						errs <- err
						return
					}
					m = m.add(kvRows(1+i%5, seed))
				case 3:
					if snap != nil {
						snap.Release()
					}
					snap, err = h.Snapshot()
					if err != nil {
						if errors.Is(err, ErrEvicted) {
							return
						}
						errs <- err
						return
					}
					sm = m
				case 4:
					if snap != nil && i%12 == 4 {
						if err := h.Rollback(snap); err != nil {
							if errors.Is(err, ErrEvicted) {
								return
							}
							errs <- err
							return
						}
						m = sm
					}
				case 5:
					got := [][]byte{make([]byte, len(m[0])), make([]byte, len(m[1]))}
					n := len(m[0]) / 16
					if err := h.ReadAsync(st, 0, n, got); err != nil {
						if errors.Is(err, ErrEvicted) {
							return
						}
						errs <- err
						return
					}
					if err := st.Sync(); err != nil {
						errs <- err
						return
					}
					if !equalCols(got, m) {
						errs <- fmt.Errorf("g%d step %d: ReadAsync of %d rows differs from the model", g, i, n)
						return
					}
				}
			}
			if snap != nil {
				snap.Release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	qwLeaks(t, p)
}
