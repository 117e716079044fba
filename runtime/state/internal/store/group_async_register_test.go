package store

import (
	"bytes"
	"testing"
)

// TestGroupRegistersAsyncRowsOnceLanded: a shared group member filled by
// AppendAsync on a stream the head never recorded registers the group's
// state only once the copies have landed (an event after them on that
// stream): no adoption sees rows not yet copied, nor keys read before the
// copy, and once they land the prompt is adopted.
func TestGroupRegistersAsyncRowsOnceLanded(t *testing.T) {
	r, p, a, st := streamedGroup(t)
	r.Hold(t, st)
	released := false
	defer func() {
		if !released {
			r.Release()
		}
	}()
	prompt := make([]uint32, 16)
	batch := [][]byte{nil, nil}
	for i := range prompt {
		prompt[i] = uint32(i + 1)
		row := tokRow(prompt[i])
		batch[0] = append(batch[0], row[0]...)
		batch[1] = append(batch[1], row[1]...)
	}
	check(t, a.Head(1).Write(0, recRow(5)))
	// One AppendAsync of the whole block: the first on this head, so st is
	// not among its streams yet when the registration is armed.
	check(t, a.Head(0).AppendAsync(st, batch))
	c := must[*Group](t)(NewSharedGroup(p, "c", "tenant", tokLayout, groupRecLayout))
	defer c.Release()
	n := must[int](t)(c.AdoptPrefix(keysOf(prompt)))
	if n != 0 {
		got := readGroupCols(t, c.Head(0), 2)
		want := tokRow(1)
		t.Errorf("adopted %d rows whose copies have not landed (stream held); row 0 reads %x %x, want %x %x",
			n, got[0][:4], got[1][:8], want[0], want[1])
		if !bytes.Equal(got[0][:4], want[0]) {
			t.Errorf("owner c reads rows that are not the prompt's")
		}
	}
	r.Release()
	released = true
	check(t, st.Sync())
	d := must[*Group](t)(NewSharedGroup(p, "d", "tenant", tokLayout, groupRecLayout))
	defer d.Release()
	if n := must[int](t)(d.AdoptPrefix(keysOf(prompt))); n != 16 {
		t.Errorf("after the copies landed: adopted %d rows of the prompt; want 16", n)
	}
	e := must[*Group](t)(NewSharedGroup(p, "e", "tenant", tokLayout, groupRecLayout))
	defer e.Release()
	if n := must[int](t)(e.AdoptPrefix(make([]byte, 4*16))); n != 0 {
		got := readGroupCols(t, e.Head(0), 2)
		t.Errorf("a prompt of 16 zero keys adopted %d rows, which read keys %x", n, got[0][:16])
	}
}
