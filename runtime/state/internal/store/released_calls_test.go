package store

import (
	"errors"
	"testing"

	"github.com/gpustate/gpustate/runtime/device"
)

// TestReleasedBeforeArguments: every call on a released head,
// snapshot or group answers ErrReleased, whatever its arguments (nil,
// out of range, of another shape), and panics on none.
func TestReleasedBeforeArguments(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := &Layout{Type: "Tok", Columns: tokLayout.Columns, Growth: Append, Bound: 64, BlockRows: 4, Descendants: Keep}
	h := must[*Head](t)(p.NewHead(l, "me"))
	check(t, h.Append(tokRow(1)))
	s := must[*Snap](t)(h.Snapshot())
	other := must[*Head](t)(p.NewHead(l, "you"))
	defer other.Release()
	otherSnap := must[*Snap](t)(other.Snapshot())
	defer otherSnap.Release()
	check(t, s.Release())
	check(t, h.Release())
	st := must[device.Stream](t)(p.Backend().(device.Streams).NewStream())
	defer st.Close()
	bad := [][]byte{{1, 2, 3}}
	want := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrReleased) {
			t.Errorf("%s on a released handle: %v, want ErrReleased", what, err)
		}
	}
	want("Append(nil)", h.Append(nil))
	want("Append(bad)", h.Append(bad))
	want("Write(-1)", h.Write(-1, bad))
	_, err := h.AppendDevice(-1)
	want("AppendDevice(-1)", err)
	_, err = h.WriteDevice(5, 1)
	want("WriteDevice(5,1)", err)
	want("Read(-1)", h.Read(-1, 7, nil))
	want("ReadColumns(-1)", h.ReadColumns(-1, 7, nil))
	_, err = h.Spans(3, 1)
	want("Spans(3,1)", err)
	want("ReadRows", h.ReadRows([]int{-5}, nil))
	want("Rollback(nil)", h.Rollback(nil))
	want("Rollback(another owner's)", h.Rollback(otherSnap))
	want("Merge(nil)", h.Merge(nil))
	want("Merge(another owner's)", h.Merge(other))
	_, err = h.At(1 << 40)
	want("At(-1)", err)
	_, err = h.VersionAt(-1)
	want("VersionAt(-1)", err)
	_, err = h.Plan(1 << 40)
	want("Plan(-1)", err)
	_, err = h.Snapshot()
	want("Snapshot", err)
	_, err = h.Branch()
	want("Branch", err)
	_, err = h.AdoptPrefix([]byte{1})
	want("AdoptPrefix(bad)", err)
	want("AppendAsync(nil)", h.AppendAsync(nil, nil))
	want("AppendAsync(bad)", h.AppendAsync(st, bad))
	want("ReadAsync(nil)", h.ReadAsync(nil, -1, 0, nil))
	want("RecordStream(nil)", h.RecordStream(nil))
	want("Step(nil)", h.Step(nil, false, nil))
	want("StepHost(nil)", h.StepHost(nil, false, nil))
	_, err = h.BlockTable()
	want("BlockTable", err)

	want("Snap.Read(-1)", s.Read(-1, 7, nil))
	want("Snap.ReadColumns(-1)", s.ReadColumns(-1, 7, nil))
	_, err = s.Spans(3, 1)
	want("Snap.Spans(3,1)", err)
	want("Snap.ReadRows", s.ReadRows([]int{-5}, nil))
	want("Snap.ReadAsync(nil)", s.ReadAsync(nil, -1, 0, nil))
	want("Snap.RecordStream(nil)", s.RecordStream(nil))
	_, err = s.BlockTable()
	want("Snap.BlockTable", err)

	g := must[*Group](t)(NewGroup(p, "me", l, l))
	gs := must[*GroupSnap](t)(g.Snapshot())
	og := must[*Group](t)(NewGroup(p, "you", l, l))
	defer og.Release()
	ogs := must[*GroupSnap](t)(og.Snapshot())
	defer gs.Release()
	defer ogs.Release()
	check(t, g.Release())
	want("Group.Rollback(nil)", g.Rollback(nil))
	want("Group.Rollback(another owner's)", g.Rollback(ogs))
	want("Group.Merge(nil)", g.Merge(nil))
	want("Group.Merge(another owner's)", g.Merge(og))
	_, err = g.At(1 << 40)
	want("Group.At(1 << 40)", err)
	_, err = g.Plan(1 << 40)
	want("Group.Plan(1 << 40)", err)
	_, err = g.Snapshot()
	want("Group.Snapshot", err)
	_, err = g.Branch()
	want("Group.Branch", err)
	_, err = g.AdoptPrefix([]byte{1})
	want("Group.AdoptPrefix(bad)", err)
	if x := g.Head(0); x != nil {
		want("a released group's head: Append", x.Append(tokRow(2)))
	}
}
