package state

import (
	"bytes"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// memsetCounter counts the bytes a backend is asked to zero; zeroes says
// whether it claims fresh memory reads as zeros.
type memsetCounter struct {
	device.Backend
	bytes int
}

func (m *memsetCounter) Memset(dst device.Ptr, v byte, n int) error {
	m.bytes += n
	return m.Backend.Memset(dst, v, n)
}

type zeroingCounter struct{ *memsetCounter }

func (zeroingCounter) AllocZeroes() bool { return true }

func TestSlabGrowthZeroesOnlyWhatIsNotKnownZero(t *testing.T) {
	for _, tc := range []struct {
		name   string
		known  bool
		zeroed int // bytes zeroed for the first slab
	}{{"plain backend", false, 256 * 256}, {"backend that allocates zeros", true, 0}} {
		mc := &memsetCounter{Backend: device.Host()}
		var b device.Backend = mc
		if tc.known {
			b = zeroingCounter{mc}
		}
		p, err := NewPool(b, PoolOptions{BlockBytes: 256})
		if err != nil {
			t.Fatal(err)
		}
		h := must[*Head](t)(p.NewHead(&Layout{Type: "M", Columns: []Column{{Name: "A", ElemSize: 1, Width: 256}}, Growth: Mutable, Bound: 4}, "a"))
		if mc.bytes != tc.zeroed {
			t.Errorf("%s: %d bytes zeroed for a new slab, want %d", tc.name, mc.bytes, tc.zeroed)
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
