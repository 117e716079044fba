package store

import (
	"fmt"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// recurrent16K is a recurrent state of 16 KiB: 4 rows of 1024 float32.
func recurrent16K(every, keep int) *Layout {
	return &Layout{
		Type:        "Recurrent",
		Columns:     []Column{{Name: "H", ElemSize: 4, Width: 1024}},
		Growth:      Mutable,
		Bound:       4,
		Descendants: Invalidate,
		Checkpoint:  &CheckpointPolicy{Every: every, Keep: keep},
	}
}

// historyBytes runs steps versions of a 16 KiB recurrent state, each from
// a 256-byte input, kept as replayed steps or as write sets of every row,
// and returns the bytes its history holds beyond the current version: the
// pool's physical bytes less the version's own, plus the recorded inputs.
func historyBytes(tb testing.TB, every, keep, steps int, replay bool) int64 {
	p, err := NewPool(device.Host(), PoolOptions{})
	check(tb, err)
	defer p.Close()
	fixedModel(p)
	h := must[*Head](tb)(p.NewHead(recurrent16K(every, keep), "s"))
	defer h.Release()
	f := stepOn(p.Backend(), []int{4096}, false)
	in := [][]byte{make([]byte, 256)}
	rows := [][]byte{make([]byte, 4*4096)}
	for i := range steps {
		in[0][0] = byte(i)
		if replay {
			check(tb, h.Step(in, false, f))
		} else {
			recur(rows, in) // what the step computes, written as a write set
			check(tb, h.Write(0, rows))
		}
	}
	st := h.Stats()
	return p.Stats().PhysicalBytes - st.PhysicalBytes + h.hist.inputBytes()
}

// TestReplayHistoryMemory checks that a replayed history of a 16 KiB
// state with 256-byte inputs holds its checkpoints and inputs and no
// more, and at most 0.05 of the write-set history where checkpoints are
// 64 versions apart.
func TestReplayHistoryMemory(t *testing.T) {
	for _, tc := range []struct {
		every, keep int
		goal        float64
	}{{16, 4, 0.08}, {64, 4, 0.05}} {
		steps := 4 * tc.every * tc.keep
		rep := historyBytes(t, tc.every, tc.keep, steps, true)
		ws := historyBytes(t, tc.every, tc.keep, steps, false)
		// Keep checkpoints of 16 KiB, and at most every*keep inputs.
		floor := int64(tc.keep*16<<10 + tc.every*tc.keep*256)
		if float64(rep) > 1.1*float64(floor) {
			t.Errorf("every=%d keep=%d: replayed history of %d bytes, more than 1.1x its checkpoints and inputs (%d)", tc.every, tc.keep, rep, floor)
		}
		if r := float64(rep) / float64(ws); r > tc.goal {
			t.Errorf("every=%d keep=%d: replayed history %d bytes, write-set history %d: %.3f, goal %.2f", tc.every, tc.keep, rep, ws, r, tc.goal)
		}
		t.Logf("every=%d keep=%d: replayed %d bytes, write sets %d bytes: %.3f", tc.every, tc.keep, rep, ws, float64(rep)/float64(ws))
	}
}

// BenchmarkReplayHistory reports the history bytes of a 16 KiB recurrent
// state with 256-byte inputs, replayed and as write sets, and their ratio.
func BenchmarkReplayHistory(b *testing.B) {
	for _, every := range []int{16, 64} {
		b.Run(fmt.Sprintf("every=%d", every), func(b *testing.B) {
			var rep, ws int64
			for b.Loop() {
				rep = historyBytes(b, every, 4, 16*every, true)
				ws = historyBytes(b, every, 4, 16*every, false)
			}
			b.ReportMetric(float64(rep), "replayed-B")
			b.ReportMetric(float64(ws), "writeset-B")
			b.ReportMetric(float64(rep)/float64(ws), "ratio")
		})
	}
}

// BenchmarkStep times one version of a 16 KiB recurrent state made by Step
// (the input recorded; the step function copies the rows out through the
// backend and back, as a stand-in for a kernel), by StepHostWith (the
// rows in place on the host backend), by StepHostWith with a step
// function that does nothing (StepHostCall: the call's own cost) and by
// Write (the rows computed on the host and written as a write set, copied
// into history).
func BenchmarkStep(b *testing.B) {
	for _, how := range []string{"Step", "StepHost", "StepHostCall", "Write"} {
		b.Run(how, func(b *testing.B) {
			p := newPool(b, PoolOptions{})
			fixedModel(p)
			h := must[*Head](b)(p.NewHead(recurrent16K(16, 4), "s"))
			defer h.Release()
			f := stepOn(p.Backend(), []int{4096}, false)
			in := [][]byte{make([]byte, 256)}
			rows := [][]byte{make([]byte, 4*4096)}
			for b.Loop() {
				switch how {
				case "Step":
					check(b, h.Step(in, false, f))
				case "StepHost":
					check(b, h.StepHostWith(in, false, hsRecur{}))
				case "StepHostCall":
					check(b, h.StepHostWith(in, false, hsNop{}))
				default:
					check(b, h.Read(0, 4, rows))
					recur(rows, in)
					check(b, h.Write(0, rows))
				}
			}
		})
	}
}

// hsNop is a HostStepper that leaves the rows as they are.
type hsNop struct{}

func (hsNop) StepHost(rows, in [][]byte) error { return nil }
