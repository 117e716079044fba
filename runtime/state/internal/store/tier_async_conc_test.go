package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestTierAsyncConcurrent: workers append on their own streams with
// AppendAsync (some waiting for the stream, some not), read their rows
// back, snapshot and release heads while copies are in flight, while
// others press the pool with mandatory heads: a head read back holds its
// rows, whether it stayed, moved to the tier and came back, or answers
// ErrEvicted; nothing leaks.
func TestTierAsyncConcurrent(t *testing.T) {
	r := statetest.HostStreamRig(t)
	p, err := NewPool(r.Backend, PoolOptions{BlockBytes: 256, MaxBytes: 20 * 256, HostTier: 12 * 256})
	check(t, err)
	defer p.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	steps := statetest.Steps(200, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := r.Streams().NewStream()
			if err != nil {
				errs <- err
				return
			}
			defer st.Close()
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			var h *Head
			var want []byte
			defer func() { h.Release() }()
			for i := range steps {
				if h == nil {
					if h, err = p.NewHead(wide("Cache", Optional), Owner(fmt.Sprint("w", w))); err != nil {
						errs <- err
						return
					}
					want = nil
				}
				switch rng.IntN(7) {
				case 0, 1, 2:
					row := wideRow(byte(w*50 + i))
					err := h.AppendAsync(st, row)
					switch {
					case err == nil:
						want = append(want, row[0]...)
					case errors.Is(err, ErrEvicted):
						h.Release()
						h = nil
						continue
					case errors.Is(err, ErrNoMemory):
					default:
						errs <- fmt.Errorf("AppendAsync: %w", err)
						return
					}
					if rng.IntN(2) == 0 {
						if err := st.Sync(); err != nil {
							errs <- err
							return
						}
					}
				case 3, 4:
					dst := make([]byte, len(want))
					err := h.Read(0, len(want)/256, [][]byte{dst})
					switch {
					case errors.Is(err, ErrEvicted):
						h.Release()
						h = nil
					case errors.Is(err, ErrNoMemory):
					case err != nil:
						errs <- fmt.Errorf("Read: %w", err)
						return
					case !bytes.Equal(dst, want):
						errs <- fmt.Errorf("worker %d step %d: rows differ (%d rows, in tier before? %v)", w, i, len(want)/256, h.tier != nil)
						return
					default:
						if len(want) >= 256 && rng.IntN(2) == 0 {
							k := rng.IntN(len(want) / 256)
							one := make([]byte, 256)
							if err := h.Read(k, k+1, [][]byte{one}); err == nil && !bytes.Equal(one, want[k*256:(k+1)*256]) {
								errs <- fmt.Errorf("worker %d: row %d read alone differs", w, k)
								return
							}
						}
					}
				case 5:
					// Released with its last copies in flight.
					h.Release()
					h = nil
				case 6:
					if len(want) > 6*256 {
						h.Release()
						h = nil
					}
				}
			}
		}()
	}
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 13))
			for i := range steps / 2 {
				m, err := p.NewHead(wide("Session", Mandatory), Owner(fmt.Sprint("m", w)))
				if err != nil {
					errs <- err
					return
				}
				n := 1 + rng.IntN(6)
				for j := range n {
					if err := m.Append(wideRow(byte(i + j))); err != nil && !errors.Is(err, ErrNoMemory) {
						errs <- fmt.Errorf("pressure: %w", err)
						m.Release()
						return
					}
				}
				m.Release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
	p.WaitPending()
	s := p.Stats()
	t.Logf("tier out %d in %d, evicted %d", s.TierOut, s.TierIn, s.EvictedBytes)
	if s.Live != 0 || s.TierBytes != 0 || s.LogicalBytes != 0 {
		t.Errorf("after releasing everything: live %d, tier %d, logical %d", s.Live, s.TierBytes, s.LogicalBytes)
	}
}
