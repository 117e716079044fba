package store

import "testing"

// TestGroupReusedWindowLayoutFindsItsOwnTable: a Layout value reused with
// another window (part of shareSig) keys a group table of its own: a state
// registered under a narrower window, whose early blocks were dropped, is
// never adopted as one of a wider window.
func TestGroupReusedWindowLayoutFindsItsOwnTable(t *testing.T) {
	p := newPool(t, PoolOptions{})
	winL := &Layout{Type: "Win", Columns: []Column{{Name: "H", ElemSize: 8, Width: 1}}, Growth: Append, Window: 4, BlockRows: 16}
	a := must[*Group](t)(NewSharedGroup(p, "a", "tenant", tokLayout, winL))
	prompt := make([]uint32, 48)
	for i := range prompt {
		prompt[i] = uint32(i + 1)
		check(t, a.Head(1).Append([][]byte{make([]byte, 8)}))
		check(t, a.Head(0).Append(tokRow(prompt[i])))
	}
	check(t, a.Release())
	winL.Window = 40 // the same Layout value, a wider window
	b := must[*Group](t)(NewSharedGroup(p, "b", "tenant", tokLayout, winL))
	defer b.Release()
	n, err := b.AdoptPrefix(keysOf(prompt))
	if n != 0 || err != nil {
		t.Errorf("a group of the re-windowed layout adopted %d rows (%v)", n, err)
	}
	h := b.Head(1)
	dst := [][]byte{make([]byte, 8*(h.Len()-h.Oldest()))}
	check(t, h.Read(h.Oldest(), h.Len(), dst)) // panics: nil block
}
