package peerbench

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state"
)

// TestFailAfterGap: a StepHost that fails or panics right after a
// version no replay rebuilds from (an adopted prefix, a WriteDevice, a
// Write) leaves the Rec member as it was, and a good step after it
// works; At of the versions since reads right.
func TestFailAfterGap(t *testing.T) {
	for _, bk := range []string{"host", "counts"} {
		for _, how := range []string{"adopt", "writedevice", "write"} {
			t.Run(bk+"/"+how, func(t *testing.T) {
				p := rpPool(t, bk, state.PoolOptions{})
				if err := rpSafe(func() error { return rpGap(p, how) }); err != nil {
					t.Error(err)
				}
				p.ForgetPrefixes("dom")
				if st := p.Stats(); st.Blocks != 0 {
					t.Errorf("Blocks = %d", st.Blocks)
				}
				if err := p.Close(); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

func rpGap(p *state.Pool, how string) error {
	row := newRow()
	g, err := NewHybridRStateShared(p, "b", "dom")
	if err != nil {
		return err
	}
	defer g.Release()
	m := rpModel{rec: make([]float32, RecRows*RecDim)}
	switch how {
	case "adopt":
		a, err := NewHybridRStateShared(p, "a", "dom")
		if err != nil {
			return err
		}
		ma := rpModel{rec: make([]float32, RecRows*RecDim)}
		pre := map[int][]float32{}
		for i := range 100 {
			if err := rpToken(a, &ma, int32(i+1), row); err != nil {
				a.Release()
				return err
			}
			pre[i+1] = slices.Clone(ma.rec)
		}
		a.Release()
		n, err := g.AdoptPrefix(ma.toks)
		if err != nil || n == 0 {
			return fmt.Errorf("adopt: %d, %v", n, err)
		}
		m = rpModel{toks: slices.Clone(ma.toks[:n]), rec: slices.Clone(pre[n])}
	case "writedevice":
		for i := range 5 {
			if err := rpToken(g, &m, int32(i+1), row); err != nil {
				return err
			}
		}
		sp, err := g.Rec().WriteDevice(0, RecRows)
		if err != nil {
			return err
		}
		// Write through the span on the host backend's memory.
		for _, s := range sp.H {
			bs, ok := device.HostBytes(p.Backend(), s.Ptr, s.Rows*RecDim*4)
			if !ok {
				return nil // not host memory: nothing to write this way
			}
			clear(bs)
		}
		clear(m.rec)
	case "write":
		for i := range 5 {
			if err := rpToken(g, &m, int32(i+1), row); err != nil {
				return err
			}
		}
		h := make([]float32, RecRows*RecDim)
		for i := range h {
			h[i] = float32(i % 7)
		}
		if err := g.Rec().Write(0, RecR{H: h}); err != nil {
			return err
		}
		copy(m.rec, h)
	}
	if err := rpCheck(g, m); err != nil {
		return fmt.Errorf("before: %w", err)
	}
	v := g.Rec().Version()
	for _, panics := range []bool{false, true} {
		err := rpSafe(func() error {
			return g.Rec().StepHost(hsInput(5), func(rows *RecR, in RecIn) error {
				for i := range rows.H {
					rows.H[i] = 99
				}
				if panics {
					panic("rp")
				}
				return errHostStep
			})
		})
		if err == nil {
			return fmt.Errorf("a failing step succeeded")
		}
		if panics != strings.HasPrefix(err.Error(), "PANIC") {
			return fmt.Errorf("failing step (panics %v): %v", panics, err)
		}
		if g.Rec().Version() != v {
			return fmt.Errorf("a failed step changed the version")
		}
		if err := rpCheck(g, m); err != nil {
			return fmt.Errorf("after a failed step (panics %v): %w", panics, err)
		}
	}
	ref := map[state.Version][]float32{v: slices.Clone(m.rec)}
	for i := range 20 {
		if err := rpToken(g, &m, int32(700+i), row); err != nil {
			return err
		}
		ref[g.Rec().Version()] = slices.Clone(m.rec)
	}
	for ver, want := range ref {
		a, err := g.Rec().At(ver)
		if err != nil {
			return fmt.Errorf("At(%d): %w", ver, err)
		}
		got, err := a.Read(0, RecRows)
		a.Release()
		if err != nil {
			return err
		}
		if !slices.Equal(got.H, want) {
			return fmt.Errorf("At(%d) reads otherwise", ver)
		}
	}
	return rpCheck(g, m)
}
