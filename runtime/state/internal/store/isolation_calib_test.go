package store

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// isoCalibPool makes a pool over fb with a checkpointed head of owner
// "a" whose every byte is 0xA7, and a version to plan for.
func isoCalibPool(t *testing.T, fb *statetest.Faults) (*Pool, *Head, *Layout, Version) {
	p, err := NewPool(fb, PoolOptions{MaxBytes: 1 << 20})
	check(t, err)
	t.Cleanup(func() { p.Close() })
	l := kv(Append, 1<<20, Keep)
	l.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 4}
	h := must[*Head](t)(p.NewHead(l, "a"))
	t.Cleanup(func() { h.Release() })
	var v Version
	for i := range 200 {
		n := 8 + i%3
		check(t, h.Append([][]byte{bytes.Repeat([]byte{0xA7}, n*16), bytes.Repeat([]byte{0xA7}, n*8)}))
		if i == 196 {
			v = h.Version()
		}
	}
	return p, h, l, v
}

// The calibrator copies owner a's rows into blocks of calibrationOwner,
// a name a user may pick too, and zeroes them before it gives them back.
// When that zeroing fails (a memset fault at the first of them, or at the
// last), they go back as a's, not on calibrationOwner's free list, where
// a user's head of that name would find a's rows through AppendDevice.
func TestCalibrationZeroingFailureKeepsRowsTheirs(t *testing.T) {
	// A dry run counts the memsets Plan makes.
	dry := statetest.NewFaults(device.Host())
	_, dh, _, dv := isoCalibPool(t, dry)
	var memsets int
	dry.FailWhen(func(op statetest.Op, _ string) bool {
		if op == statetest.OpMemset {
			memsets++
		}
		return false
	})
	must[Plan](t)(dh.Plan(dv))
	dry.Disarm()
	if memsets < probeCopies {
		t.Skipf("the calibration made %d memsets", memsets)
	}
	for _, k := range []int{-1, memsets - probeCopies, memsets - 1} { // -1: no fault, the control
		t.Run(fmt.Sprint("fail memset ", k), func(t *testing.T) {
			fb := statetest.NewFaults(device.Host())
			p, h, _, v := isoCalibPool(t, fb)
			var n int
			fb.FailWhen(func(op statetest.Op, _ string) bool {
				if op != statetest.OpMemset {
					return false
				}
				n++
				return n-1 == k
			})
			_, _ = h.Plan(v)
			fired := fb.Disarm()
			if k >= 0 && !fired {
				t.Fatalf("memset %d of %d did not fail", k, n)
			}
			if err := checkInvariants(p); err != nil {
				t.Fatal(err)
			}
			u := must[*Head](t)(p.NewHead(kv(Append, 0, Keep), calibrationOwner))
			defer u.Release()
			spans := must[[][]device.Span](t)(u.AppendDevice(4000))
			got, err := isoSpanBytes(p.b, kv(Append, 0, Keep), spans)
			check(t, err)
			if s := isoForeign(got, 0); s != "" {
				t.Fatalf("a head of owner %q finds owner a's rows: %s", calibrationOwner, s)
			}
		})
	}
}
