package store

import (
	"bytes"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// TestGroupWaitsForMembersKernels: the recurrent member's last state is
// written by a kernel queued (held back) on a stream recorded on that
// member, and the shared member's Append then fills a block: the group's
// registration waits for the members' recorded work, so another owner's
// AdoptPrefix never adopts a state the kernel has not written yet.
func TestGroupWaitsForMembersKernels(t *testing.T) {
	for _, dev := range []bool{false, true} {
		t.Run(map[bool]string{false: "Append", true: "AppendDevice"}[dev], func(t *testing.T) { waitForMembersKernels(t, dev) })
	}
}

func waitForMembersKernels(t *testing.T, dev bool) {
	r, p, a, st := streamedGroup(t)
	check(t, a.Head(1).RecordStream(st))
	prompt := make([]uint32, 16)
	for i := range prompt {
		prompt[i] = uint32(i + 1)
		if i < 15 {
			feedTok(t, a, prompt[i])
			continue
		}
		// The last token: the recurrent state by a held-back kernel (fills 0x5A).
		r.Hold(t, st)
		spans := must[[][]device.Span](t)(a.Head(1).WriteDevice(0, 4))
		check(t, r.Kernels().Launch(st, r.Fill, device.Dim3{}, device.Dim3{X: 64}, 0, spans[0][0].Ptr, uint32(0x5A), uint64(32)))
		check(t, a.Head(1).RecordStream(st))
		if dev {
			sp := must[[][]device.Span](t)(a.Head(0).AppendDevice(1))
			for c, col := range tokRow(prompt[i]) {
				check(t, r.Backend.CopyHtoD(sp[c][0].Ptr, col))
			}
			check(t, a.Head(0).Read(0, 0, [][]byte{nil, nil})) // the shared member's next call
		} else {
			check(t, a.Head(0).Append(tokRow(prompt[i])))
		}
	}
	c := must[*Group](t)(NewSharedGroup(p, "c", "tenant", tokLayout, groupRecLayout))
	defer c.Release()
	n := must[int](t)(c.AdoptPrefix(keysOf(prompt)))
	var got []byte
	if n == 16 {
		got = readRec(t, c.Head(1)) // may wait for the kernel? then it would deadlock: read in a goroutine
	}
	r.Release()
	check(t, st.Sync())
	want := bytes.Repeat([]byte{0x5A}, 32)
	if n == 16 && !bytes.Equal(got, want) {
		t.Errorf("owner c adopted the recurrent state before a's kernel wrote it: read %x, want %x", got, want)
	}
	if n == 16 && !bytes.Equal(readRec(t, c.Head(1)), want) {
		t.Errorf("after the kernel: c reads %x", readRec(t, c.Head(1)))
	}
	t.Logf("adopted %d", n)
}
