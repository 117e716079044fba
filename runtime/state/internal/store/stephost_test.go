package store

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// hostRecur is recur as a StepHost function: in place, returning rows.
func hostRecur(rows, in [][]byte) ([][]byte, error) {
	recur(rows, in)
	return rows, nil
}

// hostStepFail is hostRecur; with fail, it writes the new rows of every
// column (in place, on the host backend), then fails.
func hostStepFail(fail bool) func(rows, in [][]byte) ([][]byte, error) {
	return func(rows, in [][]byte) ([][]byte, error) {
		recur(rows, in)
		if fail {
			return nil, errStep
		}
		return rows, nil
	}
}

// TestStepHost: StepHost makes the version Step would, rows in place on
// the host backend (no copy: rows are the blocks' bytes) and copied out
// and back on another backend, and At rebuilds its versions by running
// the host function again.
func TestStepHost(t *testing.T) {
	in := [][]byte{{1, 2, 3}}
	// The reference: Step with a StepFunc that copies through the backend.
	ref := newPool(t, PoolOptions{BlockBytes: 4096})
	r := must[*Head](t)(ref.NewHead(recLayout(100, 2, Keep), "me"))
	defer r.Release()
	for range 3 {
		check(t, r.Step(in, true, stepOn(ref.Backend(), []int{16, 8}, false)))
	}
	want := [][]byte{make([]byte, 10*16), make([]byte, 10*8)}
	check(t, r.Read(0, 10, want))

	counts := statetest.NewCounts(device.Host())
	for _, c := range []struct {
		name    string
		b       device.Backend
		inPlace bool
	}{{"host", device.Host(), true}, {"other", counts, false}} {
		t.Run(c.name, func(t *testing.T) {
			defer c.b.Close()
			p, err := NewPool(c.b, PoolOptions{BlockBytes: 4096})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			h := must[*Head](t)(p.NewHead(recLayout(100, 2, Keep), "me"))
			defer h.Release()
			check(t, h.StepHost(in, true, hostRecur)) // the first copies the checkpoint's blocks
			first := h.Version()
			spans := must[[][]device.Span](t)(h.Spans(0, 10))
			counts.Reset()
			aliased := true
			check(t, h.StepHost(in, true, func(rows, in [][]byte) ([][]byte, error) {
				for c, col := range rows {
					mem, ok := device.HostBytes(p.Backend(), spans[c][0].Ptr, len(col))
					aliased = aliased && ok && &mem[0] == &col[0]
				}
				return hostRecur(rows, in)
			}))
			if aliased != c.inPlace {
				t.Errorf("StepHost handed the step the blocks' own bytes: %v, want %v", aliased, c.inPlace)
			}
			if !c.inPlace && (counts.Calls("CopyDtoH") == 0 || counts.Calls("CopyHtoD") == 0) {
				t.Errorf("StepHost on a backend whose memory is not the host's copied %d times out and %d back, want both",
					counts.Calls("CopyDtoH"), counts.Calls("CopyHtoD"))
			}
			// A step that returns rows of its own: copied into the state.
			check(t, h.StepHost(in, true, func(rows, in [][]byte) ([][]byte, error) {
				next := [][]byte{bytes.Clone(rows[0]), bytes.Clone(rows[1])}
				recur(next, in)
				return next, nil
			}))
			got := [][]byte{make([]byte, 10*16), make([]byte, 10*8)}
			check(t, h.Read(0, 10, got))
			if !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
				t.Error("three StepHost calls made other rows than three Steps")
			}
			// At replays the host function from the checkpoint at version 0.
			s := must[*Snap](t)(h.At(first))
			defer s.Release()
			check(t, s.Read(0, 10, got))
			once := [][]byte{make([]byte, 10*16), make([]byte, 10*8)}
			recur(once, in)
			if !bytes.Equal(got[0], once[0]) || !bytes.Equal(got[1], once[1]) {
				t.Error("At of a StepHost version rebuilt other rows than the step made")
			}

			// Failures change nothing, in place or not.
			v := h.Version()
			check(t, h.Read(0, 10, want))
			for name, bad := range map[string]struct {
				f    func(rows, in [][]byte) ([][]byte, error)
				want error
			}{
				"nil":   {nil, ErrShape},
				"fails": {func(rows, in [][]byte) ([][]byte, error) { clear(rows[0]); return nil, errStep }, errStep},
				"short": {func(rows, in [][]byte) ([][]byte, error) { clear(rows[0]); return [][]byte{rows[0][1:], rows[1]}, nil }, ErrShape},
				"cols":  {func(rows, in [][]byte) ([][]byte, error) { clear(rows[1]); return rows[:1], nil }, ErrShape},
			} {
				if err := h.StepHost(in, true, bad.f); !errors.Is(err, bad.want) {
					t.Errorf("StepHost %s: %v, want %v", name, err, bad.want)
				}
				check(t, h.Read(0, 10, got))
				if h.Version() != v || !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
					t.Errorf("a failed StepHost (%s) changed the head", name)
				}
			}
		})
	}
	var none *Head
	if err := none.StepHost(in, true, hostRecur); !errors.Is(err, ErrReleased) {
		t.Errorf("StepHost on a nil head: %v, want ErrReleased", err)
	}
}
