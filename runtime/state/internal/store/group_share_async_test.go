package store

import (
	"bytes"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
	"github.com/gpustate/gpustate/runtime/state/internal/statetest"
)

// tokBatch returns the rows of tokens, one batch.
func tokBatch(tokens []uint32) [][]byte {
	batch := [][]byte{nil, nil}
	for _, tk := range tokens {
		row := tokRow(tk)
		batch[0] = append(batch[0], row[0]...)
		batch[1] = append(batch[1], row[1]...)
	}
	return batch
}

// TestGroupShareAsyncTwoStreams: a shared group member fills a
// block with two AppendAsync calls on two streams, the first held back.
// The second call ends at the block boundary and takes the group's cut;
// its registration waits for an event on the second stream only
// (groupShare.committed, arm), so it registers while the first call's
// copies are still held: the keys it indexes read zeros for the first 8
// rows. A group whose prompt is those zeros then the real tokens adopts
// the 16 rows of another prompt, and the real prompt adopts nothing.
func TestGroupShareAsyncTwoStreams(t *testing.T) {
	r := statetest.HostStreamRig(t)
	p, err := NewPool(r.Backend, PoolOptions{})
	check(t, err)
	t.Cleanup(func() { p.Close() })
	a := must[*Group](t)(NewSharedGroup(p, "a", "tenant", tokLayout, groupRecLayout))
	t.Cleanup(func() { a.Release() })
	st1 := must[device.Stream](t)(r.Streams().NewStream())
	t.Cleanup(func() { st1.Close() })
	st2 := must[device.Stream](t)(r.Streams().NewStream())
	t.Cleanup(func() { st2.Close() })

	prompt := make([]uint32, 16)
	for i := range prompt {
		prompt[i] = uint32(i + 1)
	}
	check(t, a.Head(1).Write(0, recRow(5)))
	r.Hold(t, st1)
	released := false
	defer func() {
		if !released {
			r.Release()
		}
	}()
	check(t, a.Head(0).AppendAsync(st1, tokBatch(prompt[:8])))
	check(t, a.Head(0).AppendAsync(st2, tokBatch(prompt[8:])))
	check(t, st2.Sync())
	c := must[*Group](t)(NewSharedGroup(p, "c", "tenant", tokLayout, groupRecLayout))
	defer c.Release()
	if n := must[int](t)(c.AdoptPrefix(keysOf(prompt))); n != 0 {
		t.Errorf("adopted %d rows while the copies of the first 8 were held back", n)
	}
	r.Release()
	released = true
	check(t, st1.Sync())

	// A prompt never written: 8 zero tokens, then the last 8.
	other := append(make([]uint32, 8), prompt[8:]...)
	e := must[*Group](t)(NewSharedGroup(p, "e", "tenant", tokLayout, groupRecLayout))
	defer e.Release()
	if n := must[int](t)(e.AdoptPrefix(keysOf(other))); n != 0 {
		got := readGroupCols(t, e.Head(0), 2)
		t.Errorf("a prompt no group wrote (8 zero tokens first) adopted %d rows, which read keys %x", n, got[0][:32])
	}
	d := must[*Group](t)(NewSharedGroup(p, "d", "tenant", tokLayout, groupRecLayout))
	defer d.Release()
	if n := must[int](t)(d.AdoptPrefix(keysOf(prompt))); n != 16 {
		t.Errorf("after both streams ran: the prompt adopted %d rows; want 16", n)
	} else {
		got := readGroupCols(t, d.Head(0), 2)
		want := tokBatch(prompt)
		if !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
			t.Errorf("the adopted rows are not the prompt's")
		}
	}
}
