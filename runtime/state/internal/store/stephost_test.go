package store

import (
	"bytes"
	"errors"
	"fmt"
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

// TestStepHostAllocs: on the host backend, a step handed over as a
// HostStepper allocates nothing once the history recycles its records:
// the rows are the blocks' own bytes, and the slices that hand them to the
// step are the history's.
func TestStepHostAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage counters allocate")
	}
	if raceDetector {
		t.Skip("sync.Pool drops the records kept for reuse at random under the race detector")
	}
	p := newPool(t, PoolOptions{BlockBytes: 4096})
	h := must[*Head](t)(p.NewHead(recLayout(100, 2, Keep), "me"))
	defer h.Release()
	in := [][]byte{{1, 2, 3}}
	for range 256 { // past Keep: the history trims as it goes
		check(t, h.StepHostWith(in, false, hsRecur{}))
	}
	// Counted over 64 steps: AllocsPerRun rounds down.
	if n := testing.AllocsPerRun(4, func() {
		for range 64 {
			check(t, h.StepHostWith(in, false, hsRecur{}))
		}
	}); n != 0 {
		t.Errorf("%v allocations per 64 host steps; want none", n)
	}
	// The versions replay as they ran.
	v := must[*Snap](t)(h.At(h.Version() - 3))
	defer v.Release()
	ref := must[*Head](t)(p.NewHead(recLayout(100, 2, Keep), "ref"))
	defer ref.Release()
	for range 256 + 64*5 - 3 {
		check(t, ref.StepHost(in, false, hostRecur))
	}
	got, want := [][]byte{make([]byte, 10*16), make([]byte, 10*8)}, [][]byte{make([]byte, 10*16), make([]byte, 10*8)}
	check(t, v.Read(0, 10, got))
	check(t, ref.Read(0, 10, want))
	for c := range got {
		if !bytes.Equal(got[c], want[c]) {
			t.Fatalf("column %d of the version 3 steps back differs from the reference's", c)
		}
	}
}

// hostFunc is a host step function as a HostStepper: the next rows it
// returns, per column, set in rows.
type hostFunc func(rows, in [][]byte) ([][]byte, error)

// StepHost runs f.
func (f hostFunc) StepHost(rows, in [][]byte) error {
	next, err := f(rows, in)
	if err != nil {
		return err
	}
	if len(next) != len(rows) {
		return fmt.Errorf("the step returned %d columns, the state has %d: %w", len(next), len(rows), ErrShape)
	}
	copy(rows, next)
	return nil
}

// StepHost is StepHostWith of a func, as the tests write their steps.
func (h *Head) StepHost(in [][]byte, verify bool, f func(rows, in [][]byte) ([][]byte, error)) error {
	var step HostStepper
	if f != nil {
		step = hostFunc(f)
	}
	return h.StepHostWith(in, verify, step)
}

// swapCols is recur as a HostStepper that then swaps its first two
// columns' slices: each column's next rows are the other's.
type swapCols struct{}

func (swapCols) StepHost(rows, in [][]byte) error {
	recur(rows, in)
	rows[0], rows[1] = rows[1], rows[0]
	return nil
}

// TestStepHostSwappedColumns: a step that hands back two columns of one
// length swapped gets each column the other's rows, on the host backend
// (rows in place, the swapped slices the blocks' own bytes) and on one
// that copies them out and back.
func TestStepHostSwappedColumns(t *testing.T) {
	for _, be := range hsBackends() {
		t.Run(be.name, func(t *testing.T) {
			p := hsPool(t, be.b(), PoolOptions{BlockBytes: 4096})
			l := recLayout(100, 2, Keep)
			l.Columns[1] = l.Columns[0] // two columns of one length
			l.Columns[1].Name = "B"
			h := must[*Head](t)(p.NewHead(l, "me"))
			defer h.Release()
			in := [][]byte{{1, 2, 3}}
			check(t, h.StepHost(in, false, hostRecur))
			before := [][]byte{make([]byte, 10*16), make([]byte, 10*16)}
			check(t, h.Read(0, 10, before))
			want := [][]byte{bytes.Clone(before[0]), bytes.Clone(before[1])}
			recur(want, in)
			want[0], want[1] = want[1], want[0]
			check(t, h.StepHostWith(in, false, swapCols{}))
			got := [][]byte{make([]byte, 10*16), make([]byte, 10*16)}
			check(t, h.Read(0, 10, got))
			for k := range got {
				if !bytes.Equal(got[k], want[k]) {
					t.Fatalf("column %d after the swap is not the other column's next rows", k)
				}
			}
		})
	}
}
