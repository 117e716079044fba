package store

import (
	"bytes"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// zeroingCounts is statetest.Counts that claims fresh memory reads as
// zeros: the device of TestSlabGrowthZeroesOnlyWhatIsNotKnownZero alone,
// so it stays here.
type zeroingCounts struct{ *statetest.Counts }

func (zeroingCounts) AllocZeroes() bool { return true }

func TestSlabGrowthZeroesOnlyWhatIsNotKnownZero(t *testing.T) {
	for _, tc := range []struct {
		name   string
		known  bool
		zeroed int // bytes zeroed for the first slab
	}{{"plain backend", false, 256 * 256}, {"backend that allocates zeros", true, 0}} {
		mc := statetest.NewCounts(device.Host())
		var b device.Backend = mc
		if tc.known {
			b = zeroingCounts{mc}
		}
		p, err := NewPool(b, PoolOptions{BlockBytes: 256})
		if err != nil {
			t.Fatal(err)
		}
		h := must[*Head](t)(p.NewHead(&Layout{Type: "M", Columns: []Column{{Name: "A", ElemSize: 1, Width: 256}}, Growth: Mutable, Bound: 4}, "a"))
		if got := mc.Bytes("Memset"); got != int64(tc.zeroed) {
			t.Errorf("%s: %d bytes zeroed for a new slab, want %d", tc.name, got, tc.zeroed)
		}
		dst := [][]byte{make([]byte, 4*256)}
		check(t, h.Read(0, 4, dst))
		if !bytes.Equal(dst[0], make([]byte, 4*256)) {
			t.Errorf("%s: a new mutable state does not read as zeros", tc.name)
		}
		check(t, h.Release())
		check(t, p.Close())
	}
}
