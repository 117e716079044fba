package store

import (
	"reflect"
	"testing"
)

// TestLayoutEqualSeesEveryField: a change to any field of a layout makes
// it unequal, so that a pool's shape cache never serves a shape made of a
// layout that has changed since (a field added to Layout and left out of
// equal fails here).
func TestLayoutEqualSeesEveryField(t *testing.T) {
	base := func() *Layout {
		return &Layout{
			Type: "T", Columns: []Column{{Name: "A", ElemSize: 4, Width: 2}}, Growth: Mutable, Bound: 8,
			Checkpoint: &CheckpointPolicy{Every: 4, Keep: 2}, Input: []Column{{Name: "X", ElemSize: 4, Width: 1}},
		}
	}
	if !base().equal(base()) {
		t.Fatal("two equal layouts are unequal")
	}
	typ := reflect.TypeFor[Layout]()
	for i := range typ.NumField() {
		l := base()
		f := reflect.ValueOf(l).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Int, reflect.Int64:
			f.SetInt(f.Int() + 1)
		case reflect.Slice: // a column's size, or one more column
			if f.Len() > 0 {
				f.Index(0).Field(2).SetInt(f.Index(0).Field(2).Int() + 1)
			}
		case reflect.Pointer:
			f.Elem().Field(0).SetInt(f.Elem().Field(0).Int() + 1)
		default:
			t.Fatalf("field %s: kind %s; teach this test to change it", typ.Field(i).Name, f.Kind())
		}
		if l.equal(base()) || base().equal(l) {
			t.Errorf("a change to %s leaves the layouts equal", typ.Field(i).Name)
		}
	}
	nilCP := base()
	nilCP.Checkpoint = nil
	if nilCP.equal(base()) || base().equal(nilCP) {
		t.Error("a layout without a checkpoint policy equals one with")
	}
}

// TestShapeCacheFollowsLayoutChanges: a head made of a layout changed
// since an earlier head of the same address has the changed layout.
func TestShapeCacheFollowsLayoutChanges(t *testing.T) {
	p := newPool(t, PoolOptions{})
	l := &Layout{Type: "T", Columns: []Column{{Name: "A", ElemSize: 4, Width: 2}}, Growth: Mutable, Bound: 8}
	a := must[*Head](t)(p.NewHead(l, "o"))
	defer a.Release()
	l.Bound, l.Columns[0].Width = 16, 3
	b := must[*Head](t)(p.NewHead(l, "o"))
	defer b.Release()
	if a.Bound() != 8 || b.Bound() != 16 {
		t.Errorf("bounds %d and %d, want 8 and 16", a.Bound(), b.Bound())
	}
	if got := b.rowBytes[0]; got != 12 {
		t.Errorf("the second head's row is %d bytes, want 12", got)
	}
	l.Columns[0].ElemSize = 0 // a bad layout is refused, cached or not
	if _, err := p.NewHead(l, "o"); err == nil {
		t.Error("a layout changed to a bad one made a head")
	}
}
