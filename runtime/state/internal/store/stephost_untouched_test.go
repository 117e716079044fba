package store

import (
	"bytes"
	"errors"
	"runtime"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// TestStepHostFailedBeforeWritingRebuildsNothing: on a backend whose
// memory is not the host's, a StepHost that fails before its rows are
// copied back (the copy of the rows to the host failed, or the step failed,
// panicked or ended its goroutine on that copy) leaves the state's rows as
// they were, so the call gives
// back what it took and rebuilds nothing: no recorded step runs again,
// and the pool holds what it held. It used to rebuild the version from its
// checkpoint by replaying every step since.
func TestStepHostFailedBeforeWritingRebuildsNothing(t *testing.T) {
	f := statetest.NewFaults(device.Host())
	p, err := NewPool(f, PoolOptions{BlockBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h := must[*Head](t)(p.NewHead(recLayout(100, 2, Keep), "me"))
	defer h.Release()
	in := [][]byte{{1, 2, 3}}
	replayed := 0
	counted := func(rows, in [][]byte) ([][]byte, error) {
		replayed++
		return hostRecur(rows, in)
	}
	for range 3 {
		check(t, h.StepHost(in, true, counted))
	}
	v, want := h.Version(), [][]byte{make([]byte, 10*16), make([]byte, 10*8)}
	check(t, h.Read(0, 10, want))
	before := p.Stats()

	for name, c := range map[string]struct {
		arm  func()
		step func(rows, in [][]byte) ([][]byte, error)
		want error
	}{
		"copy to the host": {func() { f.ArmMethod("CopyDtoH", 0) }, hostRecur, statetest.ErrInjected},
		"the step":         {func() {}, func(rows, in [][]byte) ([][]byte, error) { clear(rows[0]); return nil, errStep }, errStep},
		"a short column":   {func() {}, func(rows, in [][]byte) ([][]byte, error) { return [][]byte{rows[0][1:], rows[1]}, nil }, ErrShape},
		"a panic":          {func() {}, func(rows, in [][]byte) ([][]byte, error) { clear(rows[0]); panic(errStep) }, errStep},
		"the goroutine's end": {func() {}, func(rows, in [][]byte) ([][]byte, error) {
			clear(rows[0])
			runtime.Goexit()
			return nil, nil
		}, errStepExited},
	} {
		replayed = 0
		c.arm()
		var err error
		done := make(chan struct{})
		go func() { // the step may panic or end the goroutine
			defer close(done)
			err = errStepExited
			defer func() {
				if v := recover(); v != nil {
					err, _ = v.(error)
				}
			}()
			err = h.StepHost(in, true, c.step)
		}()
		<-done
		f.Disarm()
		if !errors.Is(err, c.want) {
			t.Fatalf("%s: StepHost answered %v, want %v", name, err, c.want)
		}
		if replayed != 0 {
			t.Errorf("%s: the failed StepHost replayed %d recorded steps, want none", name, replayed)
		}
		if after := p.Stats(); after.PhysicalBytes != before.PhysicalBytes || after.Blocks != before.Blocks {
			t.Errorf("%s: the failed StepHost changed the pool: %d bytes in %d blocks, was %d in %d", name,
				after.PhysicalBytes, after.Blocks, before.PhysicalBytes, before.Blocks)
		}
		got := [][]byte{make([]byte, 10*16), make([]byte, 10*8)}
		check(t, h.Read(0, 10, got))
		if h.Version() != v || !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
			t.Errorf("%s: the failed StepHost changed the head", name)
		}
	}
	// A step after them runs on the rows as they were.
	check(t, h.StepHost(in, true, hostRecur))
	next := [][]byte{bytes.Clone(want[0]), bytes.Clone(want[1])}
	recur(next, in)
	got := [][]byte{make([]byte, 10*16), make([]byte, 10*8)}
	check(t, h.Read(0, 10, got))
	if !bytes.Equal(got[0], next[0]) || !bytes.Equal(got[1], next[1]) {
		t.Error("a step after the failed ones made other rows than one step from the rows before")
	}
}

// TestStepRestoresWhenItsErrorWrapsAnUntouchedOne: a step function that
// wrote rows and then failed with an error wrapping one that another
// StepHost answered for rows it did not write is undone all the same:
// what the step function was handed, not its error, says whether the rows
// are as they were.
func TestStepRestoresWhenItsErrorWrapsAnUntouchedOne(t *testing.T) {
	for _, kind := range []string{"host-inplace", "device-stepper"} {
		t.Run(kind, func(t *testing.T) {
			f := statetest.NewFaults(device.Host())
			pb, err := NewPool(f, PoolOptions{BlockBytes: 4096})
			if err != nil {
				t.Fatal(err)
			}
			defer pb.Close()
			hb := must[*Head](t)(pb.NewHead(recLayout(100, 2, Keep), "b"))
			defer hb.Release()
			in := [][]byte{{1, 2, 3}}
			check(t, hb.StepHost(in, true, hostRecur))

			var pa *Pool
			if kind == "host-inplace" {
				pa = newPool(t, PoolOptions{BlockBytes: 4096})
			} else {
				pa = pb
			}
			ha := must[*Head](t)(pa.NewHead(recLayout(100, 2, Keep), "a"))
			defer ha.Release()
			for range 3 {
				check(t, ha.StepHost(in, true, hostRecur))
			}
			want := [][]byte{make([]byte, 10*16), make([]byte, 10*8)}
			check(t, ha.Read(0, 10, want))
			inner := func() error {
				f.ArmMethod("CopyDtoH", 0)
				defer f.Disarm()
				return hb.StepHost(in, true, hostRecur)
			}
			if kind == "host-inplace" {
				err = ha.StepHost(in, true, func(rows, in [][]byte) ([][]byte, error) {
					for _, r := range rows {
						clear(r)
					}
					return nil, inner()
				})
			} else {
				err = ha.Step(in, true, func(spans [][]device.Span, in [][]byte) error {
					for c, col := range spans {
						for _, sp := range col {
							check(t, pa.Backend().CopyHtoD(sp.Ptr, make([]byte, sp.Rows*[]int{16, 8}[c])))
						}
					}
					return inner()
				})
			}
			if err == nil || !errors.Is(err, statetest.ErrInjected) {
				t.Fatalf("err %v", err)
			}
			got := [][]byte{make([]byte, 10*16), make([]byte, 10*8)}
			check(t, ha.Read(0, 10, got))
			if !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
				t.Errorf("the failed step left the rows it wrote in place: %v", got[1][:8])
			}
		})
	}
}
