package store

import (
	"bytes"
	"errors"
	"testing"
)

// tailObj is a live head or snapshot and the tokens it must read, for the
// adversarial tests of the in-place append that are not models (the model,
// TestAppendInPlaceModel, keeps a reference: tailRef).
type tailObj struct {
	h    *Head
	s    *Snap
	toks []uint32
	name string
}

func (o *tailObj) read(from, to int, dst [][]byte) error {
	if o.h != nil {
		return o.h.Read(from, to, dst)
	}
	return o.s.Read(from, to, dst)
}

func (o *tailObj) oldest() int {
	if o.h != nil {
		return o.h.Oldest()
	}
	return o.s.Oldest()
}

// tailCheck reads o's readable rows and compares them with its tokens. It
// reports false when o answers ErrInvalidated (a rollback's descendant).
func tailCheck(t *testing.T, step int, o *tailObj) bool {
	t.Helper()
	from, to := o.oldest(), len(o.toks)
	got := [][]byte{make([]byte, 4*(to-from)), make([]byte, 8*(to-from))}
	err := o.read(from, to, got)
	if errors.Is(err, ErrInvalidated) && o.s != nil {
		return false
	}
	if errors.Is(err, ErrInvalidated) && o.h != nil || errors.Is(err, ErrEvicted) {
		return false
	}
	if err != nil {
		t.Fatalf("step %d: %s: read [%d,%d): %v", step, o.name, from, to, err)
	}
	w := tailWant(o.toks[from:to])
	if !bytes.Equal(got[0], w[0]) || !bytes.Equal(got[1], w[1]) {
		for i := from; i < to; i++ {
			k := got[0][4*(i-from) : 4*(i-from+1)]
			if !bytes.Equal(k, w[0][4*(i-from):4*(i-from+1)]) {
				t.Fatalf("step %d: %s reads other rows than its own: row %d of [%d,%d) reads key %x, want token %d", step, o.name, i, from, to, k, o.toks[i])
			}
		}
		t.Fatalf("step %d: %s reads other values than its own", step, o.name)
	}
	return true
}

// TestAppendPastSharedTail: an append to a block that other versions hold
// too writes in place when the rows go past every holder's (the block's
// fill), and copies otherwise; every version reads its own rows.
func TestAppendPastSharedTail(t *testing.T) {
	l := &Layout{Type: "Tok", Columns: tokLayout.Columns, Growth: Append, Bound: 1024, BlockRows: 16, Descendants: Keep}
	p := newPool(t, PoolOptions{})
	h := must[*Head](t)(p.NewHead(l, "me"))
	defer h.Release()
	appendToks := func(h *Head, toks ...uint32) {
		t.Helper()
		for _, tok := range toks {
			check(t, h.Append(tokRow(tok)))
		}
	}
	reads := func(what string, r interface {
		Read(from, to int, dst [][]byte) error
	}, toks ...uint32) {
		t.Helper()
		got := [][]byte{make([]byte, 4*len(toks)), make([]byte, 8*len(toks))}
		check(t, r.Read(0, len(toks), got))
		var want [2][]byte
		for _, tok := range toks {
			row := tokRow(tok)
			want[0], want[1] = append(want[0], row[0]...), append(want[1], row[1]...)
		}
		if !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
			t.Fatalf("%s reads other rows than its %d tokens'", what, len(toks))
		}
	}
	appendToks(h, 1, 2, 3)
	s1 := must[*Snap](t)(h.Snapshot())
	defer s1.Release()
	before := p.Stats().PhysicalBytes
	appendToks(h, 4, 5)
	if got := p.Stats().PhysicalBytes; got != before {
		t.Errorf("an append past a snapshot's rows took %d bytes; want none (in place)", got-before)
	}
	reads("the snapshot", s1, 1, 2, 3)
	reads("the head", h, 1, 2, 3, 4, 5)

	// Two branches of one version: the first to append writes in place,
	// the second copies, since the first's rows lie where its would go.
	b1 := must[*Head](t)(h.Branch())
	defer b1.Release()
	b2 := must[*Head](t)(h.Branch())
	defer b2.Release()
	appendToks(b1, 10)
	before = p.Stats().PhysicalBytes
	appendToks(b2, 20)
	if got := p.Stats().PhysicalBytes; got == before {
		t.Error("a second branch appended in place where the first branch's row lies")
	}
	appendToks(h, 30) // the head's rows too go where b1's went: a copy
	reads("branch 1", b1, 1, 2, 3, 4, 5, 10)
	reads("branch 2", b2, 1, 2, 3, 4, 5, 20)
	reads("the head", h, 1, 2, 3, 4, 5, 30)

	// A rollback to the snapshot: the rows after it go where the rolled
	// back version's went, which the snapshot taken after keeps (Keep).
	s2 := must[*Snap](t)(h.Snapshot())
	defer s2.Release()
	check(t, h.Rollback(s1))
	appendToks(h, 40, 41)
	reads("the rolled back head", h, 1, 2, 3, 40, 41)
	reads("the snapshot after the cut", s2, 1, 2, 3, 4, 5, 30)
	reads("the first snapshot", s1, 1, 2, 3)
	if err := checkInvariants(p); err != nil {
		t.Fatal(err)
	}
}
