package store_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gpustate/gpustate/gen/testdata/src/kv"
	"github.com/gpustate/gpustate/runtime/state"
)

// wideRows returns rows of the four-column kv.KVCache whose At carries tok.
func wideRows(tok []int64) kv.KVCache {
	n := len(tok)
	b := kv.KVCache{Keys: make([]kv.Half, n*128), Values: make([]kv.Half, n*128), Pos: make([][2]int32, n), At: make([]time.Duration, n)}
	for i, v := range tok {
		b.At[i] = time.Duration(v)
		b.Pos[i] = [2]int32{int32(v), int32(-v)}
		b.Keys[i*128] = kv.Half(v)
	}
	return b
}

// wideCheck reports where r does not read as want.
func wideCheck(r interface {
	Read(from, to int) (kv.KVCache, error)
}, want []int64) error {
	got, err := r.Read(0, len(want))
	if err != nil {
		return err
	}
	for i, v := range want {
		if got.At[i] != time.Duration(v) || got.Pos[i] != [2]int32{int32(v), int32(-v)} || got.Keys[i*128] != kv.Half(v) {
			return fmt.Errorf("row %d reads %d, want %d", i, got.At[i], v)
		}
	}
	return nil
}

// wideSession snapshots, appends and rolls back a four-column state,
// whose roots keep their columns in an allocation of their own, while
// three-column sessions run beside it on the roots both give back.
func wideSession(p *state.Pool, id, rounds int) error {
	s, err := kv.NewKVCacheState(p, state.Owner(fmt.Sprint("w", id)))
	if err != nil {
		return err
	}
	defer s.Release()
	var model []int64
	next := int64(id * 1_000_000)
	for r := range rounds {
		v, err := s.Snapshot()
		if err != nil {
			return err
		}
		at := slices.Clone(model)
		next++
		err = s.Append(wideRows([]int64{next}))
		if err == nil {
			model = append(model, next)
			if r%3 == 0 {
				if err = s.Rollback(v); err == nil {
					model = at
				}
			}
		}
		if err == nil {
			err = wideCheck(v, at)
		}
		v.Release()
		if err == nil {
			err = wideCheck(s, model)
		}
		if err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
	}
	return nil
}

// Four-column and three-column states side by side: the released roots of
// either make the other's next roots, the wide ones with their columns'
// allocation, and no state reads another's rows.
func TestReuseWideRoots(t *testing.T) {
	p := breakPool(t)
	defer p.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for id := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if id%2 == 0 {
				err = wideSession(p, id+1, 300)
			} else {
				err = kvSession(p, id+1, 150)
			}
			if err != nil && !errors.Is(err, state.ErrReleased) {
				errs <- fmt.Errorf("session %d: %w", id+1, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := p.Stats(); st.Live != 0 || st.PhysicalBytes != 0 || st.LogicalBytes != 0 {
		t.Errorf("after every handle's release: %+v", st)
	}
}
