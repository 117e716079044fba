package state

import (
	"bytes"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// TestGroupAdoptedStateWrittenInPlaceStaysIsolated: a group that adopted
// another owner's registered recurrent state, once the cache let go of it
// (ForgetPrefixes), holds blocks carved for that owner alone. Writing them
// in place and releasing them would hand the writer's rows back to the
// first owner's free list unzeroed; the write path copies them instead,
// so the first owner's next state never reads the second's rows.
func TestGroupAdoptedStateWrittenInPlaceStaysIsolated(t *testing.T) {
	for _, write := range []struct {
		name string
		do   func(t *testing.T, h *Head, secret []byte)
	}{
		{"Write", func(t *testing.T, h *Head, secret []byte) { check(t, h.Write(1, [][]byte{secret[:8]})) }},
		{"WriteDevice", func(t *testing.T, h *Head, secret []byte) {
			spans := must[[][]device.Span](t)(h.WriteDevice(0, 4))
			check(t, h.pool.b.CopyHtoD(spans[0][0].Ptr, secret))
		}},
		{"Step", func(t *testing.T, h *Head, secret []byte) {
			check(t, h.Step([][]byte{{1}}, false, func(spans [][]device.Span, _ [][]byte) error {
				return h.pool.b.CopyHtoD(spans[0][0].Ptr, secret)
			}))
		}},
	} {
		t.Run(write.name, func(t *testing.T) {
			p := newPool(t, PoolOptions{})
			recL := rec(Invalidate)
			recL.Checkpoint = &CheckpointPolicy{Every: 4, Keep: 2}
			a := must[*Group](t)(NewSharedGroup(p, "a", "tenant", tokLayout, recL))
			prompt := make([]uint32, 16)
			for i := range prompt {
				prompt[i] = uint32(i + 1)
				feedTok(t, a, prompt[i])
			}
			check(t, a.Release())
			b := must[*Group](t)(NewSharedGroup(p, "b", "tenant", tokLayout, recL))
			if n, err := b.AdoptPrefix(keysOf(prompt)); n != 16 || err != nil {
				t.Fatalf("AdoptPrefix = %d, %v; want 16", n, err)
			}
			p.ForgetPrefixes("tenant") // b holds what it adopted alone now
			secret := bytes.Repeat([]byte{0xbb}, 4*8)
			write.do(t, b.Head(1), secret)
			if got := readRec(t, b.Head(1)); !bytes.Contains(got, secret[:8]) {
				t.Fatalf("b reads %x after its write of %x", got, secret)
			}
			check(t, b.Release())
			// Owner a's next states take a's free blocks: none holds b's rows.
			for range 4 {
				h := must[*Head](t)(p.NewHead(recL, "a"))
				defer h.Release()
				if got := readRec(t, h); bytes.Contains(got, []byte{0xbb, 0xbb, 0xbb, 0xbb}) {
					t.Fatalf("a new state of owner a reads owner b's rows: %x", got)
				}
			}
			// An append state of the same block size whose rows a kernel
			// would write (AppendDevice) reads what its blocks held.
			appL := &Layout{Type: "App", Columns: recL.Columns, Growth: Append, Bound: 256, BlockRows: 128}
			for range 4 {
				h := must[*Head](t)(p.NewHead(appL, "a"))
				defer h.Release()
				must[[][]device.Span](t)(h.AppendDevice(4))
				if got := readRec(t, h); bytes.Contains(got, []byte{0xbb, 0xbb, 0xbb, 0xbb}) {
					t.Fatalf("rows owner a's kernel has not written read owner b's rows: %x", got)
				}
			}
		})
	}
}
