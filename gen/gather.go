package gen

import (
	"fmt"

	"github.com/dave/jennifer/jen"
)

// The gather read (ReadRows) and the read into a caller's batch (ReadInto)
// of heads and snapshots.

// target returns the receiver and the store handle of recv's methods:
// s *TState with _T_head(s), or v *TSnapshot with _T_snap(v).
func (m *model) target(recv Recv) (*jen.Statement, func() *jen.Statement) {
	if recv == RecvSnapshot {
		return m.snapRecv(), m.storeSnap
	}
	return m.recv(), m.storeHead
}

// storeHead is the store head of the receiver s: _T_head(s), nil for a nil
// s, so that a call on a nil handle answers the store's state.ErrReleased
// instead of panicking.
func (m *model) storeHead() *jen.Statement { return jen.Id(headName(m.typ())).Call(jen.Id("s")) }

// storeSnap is storeHead for the snapshot v: _T_snap(v).
func (m *model) storeSnap() *jen.Statement { return jen.Id(snapName(m.typ())).Call(jen.Id("v")) }

func headName(typ string) string { return "_" + typ + "_head" }
func snapName(typ string) string { return "_" + typ + "_snap" }

// handleFuncs declares _T_head and, with a snapshot, _T_snap.
func (m *model) handleFuncs() []jen.Code {
	out := []jen.Code{
		doc([]string{fmt.Sprintf("%s returns the store head of s, nil for a nil s (its methods answer state.ErrReleased).", headName(m.typ()))}).
			Func().Id(headName(m.typ())).Params(jen.Id("s").Op("*").Id(m.head())).Op("*").Add(st("Head")).Block(
			jen.If(jen.Id("s").Op("==").Nil()).Block(jen.Return(jen.Nil())),
			jen.Return(jen.Id("s").Dot("h")),
		),
	}
	if m.snapshot() {
		out = append(out, doc([]string{fmt.Sprintf("%s returns the store snapshot of v, nil for a nil v (its methods answer state.ErrReleased).", snapName(m.typ()))}).
			Func().Id(snapName(m.typ())).Params(jen.Id("v").Op("*").Id(m.snap())).Op("*").Add(st("Snap")).Block(
			jen.If(jen.Id("v").Op("==").Nil()).Block(jen.Return(jen.Nil())),
			jen.Return(jen.Id("v").Dot("snap")),
		))
	}
	return out
}

func readRowsCode(recv Recv) func(*model) *jen.Statement {
	return func(m *model) *jen.Statement {
		r, store := m.target(recv)
		return jen.Func().Params(r).Id("ReadRows").Params(jen.Id("idx").Index().Int()).Params(jen.Id(m.typ()), jen.Error()).Block(
			jen.Return(jen.Id(gatherName(m.typ())).Call(store(), jen.Id("idx"))),
		)
	}
}

// readIntoCode calls the store handle's Read into a copy of *dst whose
// fields are resized in place, and stores the copy in *dst only when the
// read succeeded, so that a failed ReadInto leaves dst as it was; the
// batch is built in the method itself, on the concrete handle, so that it
// stays on the stack.
func readIntoCode(recv Recv) func(*model) *jen.Statement {
	return func(m *model) *jen.Statement { return m.intoCode(recv, "ReadInto", "Read", false, false) }
}

// readFieldsCode is readIntoCode for ReadFields, which resizes and reads
// only the fields of *dst that are not nil (the store's ReadColumns skips
// the nil columns).
func readFieldsCode(recv Recv) func(*model) *jen.Statement {
	return func(m *model) *jen.Statement { return m.intoCode(recv, "ReadFields", "ReadColumns", true, false) }
}

// readAsyncCode is readIntoCode for ReadAsync, whose copies the store
// queues on the stream st, its first parameter.
func readAsyncCode(recv Recv) func(*model) *jen.Statement {
	return func(m *model) *jen.Statement { return m.intoCode(recv, "ReadAsync", "ReadAsync", false, true) }
}

// intoCode renders ReadInto, ReadFields or ReadAsync, name, over the
// store's method call; some resizes only the fields that are not nil, and
// stream takes a device.Stream first and passes it on.
func (m *model) intoCode(recv Recv, name, call string, some, stream bool) *jen.Statement {
	r, store := m.target(recv)
	x := jen.Id("h")
	if recv == RecvSnapshot {
		x = jen.Id("snap")
	}
	// A range past the rows is left to the store to report, never sizing
	// the batch; a batch whose fields hold the rows already needs no
	// resize that allocates, and the store checks the range before it
	// copies, with the same error, so it skips the handle's Len.
	past := jen.Id("to").Op(">").Add(x.Clone()).Dot("Len").Call()
	if window(m.c) {
		past = jen.Parens(past.Op("||").Id("from").Op("<").Id("to").Op("&&").Id("from").Op("<").Add(x.Clone()).Dot("Oldest").Call())
	}
	bad := jen.Id("dst").Op("==").Nil().Op("||").Id("from").Op("<").Lit(0).Op("||").Id("to").Op("<").Id("from").Op("||").
		Op("!").Parens(m.holds(jen.Id("to").Op("-").Id("from"), some)).Op("&&").Add(past)
	args := func(batch jen.Code) []jen.Code {
		a := []jen.Code{jen.Id("from"), jen.Id("to"), batch}
		if stream {
			a = append([]jen.Code{jen.Id("st")}, a...)
		}
		return a
	}
	body := []jen.Code{
		x.Clone().Op(":=").Add(store()),
		jen.If(bad).Block(
			jen.Return(x.Clone().Dot(call).Call(args(jen.Nil())...)),
		),
		jen.Id("n").Op(":=").Id("to").Op("-").Id("from"),
		jen.Id("rows").Op(":=").Op("*").Id("dst"),
	}
	body = append(body, m.resizeFields(jen.Id("n"), some)...)
	body = append(body,
		jen.If(jen.Err().Op(":=").Add(x.Clone()).Dot(call).Call(args(m.batch("rows"))...), jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Err()),
		),
		jen.Op("*").Id("dst").Op("=").Id("rows"),
		jen.Return(jen.Nil()),
	)
	params := []jen.Code{jen.Id("dst").Op("*").Id(m.typ()), fromTo()}
	if stream {
		params = append([]jen.Code{jen.Id("st").Qual(devicePkg, "Stream")}, params...)
	}
	return jen.Func().Params(r).Id(name).Params(params...).Error().Block(body...)
}

// holds is true when every field of *dst (with some, every one that is
// not nil) has the capacity of n rows.
func (m *model) holds(n *jen.Statement, some bool) *jen.Statement {
	var all *jen.Statement
	for _, f := range m.fields {
		c := jen.Cap(jen.Id("dst").Dot(f.Name))
		if f.Width != 1 {
			c = c.Op("/").Lit(f.Width)
		}
		t := n.Clone().Op("<=").Add(c)
		if some {
			t = jen.Parens(jen.Id("dst").Dot(f.Name).Op("==").Nil().Op("||").Add(t))
		}
		if all == nil {
			all = t
		} else {
			all = all.Op("&&").Add(t)
		}
	}
	return all
}

// resizeFields resizes every field of the batch rows to n rows (with some,
// only those that are not nil).
func (m *model) resizeFields(n *jen.Statement, some bool) []jen.Code {
	var out []jen.Code
	for _, f := range m.fields {
		k := n.Clone()
		if f.Width != 1 {
			k = n.Clone().Op("*").Lit(f.Width)
		}
		resize := jen.Id("rows").Dot(f.Name).Op("=").Add(st("Resize")).Call(jen.Id("rows").Dot(f.Name), k)
		if some {
			resize = jen.If(jen.Id("rows").Dot(f.Name).Op("!=").Nil()).Block(resize)
		}
		out = append(out, resize)
	}
	return out
}

// readRowsIntoCode renders ReadRowsInto: the gather of ReadRows into a
// copy of *dst whose fields are resized in place, stored in *dst only when
// the gather succeeded.
func readRowsIntoCode(recv Recv) func(*model) *jen.Statement {
	return func(m *model) *jen.Statement {
		r, store := m.target(recv)
		x := jen.Id("h")
		if recv == RecvSnapshot {
			x = jen.Id("snap")
		}
		body := []jen.Code{
			x.Clone().Op(":=").Add(store()),
			jen.If(jen.Id("dst").Op("==").Nil()).Block(
				jen.Return(x.Clone().Dot("ReadRows").Call(jen.Id("idx"), jen.Nil())),
			),
			jen.Id("rows").Op(":=").Op("*").Id("dst"),
		}
		body = append(body, m.resizeFields(jen.Len(jen.Id("idx")), false)...)
		body = append(body,
			jen.If(jen.Err().Op(":=").Add(x.Clone()).Dot("ReadRows").Call(jen.Id("idx"), m.batch("rows")), jen.Err().Op("!=").Nil()).Block(
				jen.Return(jen.Err()),
			),
			jen.Op("*").Id("dst").Op("=").Id("rows"),
			jen.Return(jen.Nil()),
		)
		return jen.Func().Params(r).Id("ReadRowsInto").Params(jen.Id("dst").Op("*").Id(m.typ()), jen.Id("idx").Index().Int()).Error().Block(body...)
	}
}

// gatherFunc declares the typed gather shared by the head and the
// snapshot.
func (m *model) gatherFunc() jen.Code {
	d := make([]jen.Code, len(m.fields))
	for i, f := range m.fields {
		n := jen.Len(jen.Id("idx"))
		if f.Width != 1 {
			n = jen.Len(jen.Id("idx")).Op("*").Lit(f.Width)
		}
		d[i] = key(f.Name, jen.Make(jen.Index().Add(m.typeCode(f.elem)), n))
	}
	name := gatherName(m.typ())
	return doc([]string{
		fmt.Sprintf("%s copies the rows of r, a head or a snapshot, at indices idx into a new %s.", name, m.typ()),
	}).Func().Id(name).Params(
		jen.Id("r").Interface(
			jen.Id("ReadRows").Params(jen.Id("idx").Index().Int(), jen.Id("dst").Index().Index().Byte()).Error(),
		),
		jen.Id("idx").Index().Int(),
	).Params(jen.Id(m.typ()), jen.Error()).Block(
		jen.Id("rows").Op(":=").Id(m.typ()).Custom(multi, d...),
		jen.If(jen.Err().Op(":=").Id("r").Dot("ReadRows").Call(jen.Id("idx"), m.batch("rows")), jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Id(m.typ()).Values(), jen.Err()),
		),
		jen.Return(jen.Id("rows"), jen.Nil()),
	)
}
