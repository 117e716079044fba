package gen

import (
	"fmt"

	"github.com/dave/jennifer/jen"
)

// The gather read (ReadRows) and the read into a caller's batch (ReadInto)
// of heads and snapshots.

// target returns the receiver and the store handle of recv's methods:
// s *TState with s.h, or v *TSnapshot with v.snap.
func (m *model) target(recv Recv) (*jen.Statement, func() *jen.Statement) {
	if recv == RecvSnapshot {
		return m.snapRecv(), func() *jen.Statement { return jen.Id("v").Dot("snap") }
	}
	return m.recv(), func() *jen.Statement { return jen.Id("s").Dot("h") }
}

func readRowsCode(recv Recv) func(*model) *jen.Statement {
	return func(m *model) *jen.Statement {
		r, store := m.target(recv)
		return jen.Func().Params(r).Id("ReadRows").Params(jen.Id("idx").Index().Int()).Params(jen.Id(m.typ()), jen.Error()).Block(
			jen.Return(jen.Id(gatherName(m.typ())).Call(store(), jen.Id("idx"))),
		)
	}
}

// readIntoCode calls the store handle's Read with dst's fields resized in
// place; the batch is built in the method itself, on the concrete handle,
// so that it stays on the stack.
func readIntoCode(recv Recv) func(*model) *jen.Statement {
	return func(m *model) *jen.Statement {
		r, store := m.target(recv)
		bad := jen.Id("dst").Op("==").Nil().Op("||").Id("from").Op("<").Lit(0).Op("||").Id("to").Op("<").Id("from").Op("||").Id("to").Op(">").Add(store()).Dot("Len").Call()
		if window(m.c) {
			bad = bad.Op("||").Id("from").Op("<").Id("to").Op("&&").Id("from").Op("<").Add(store()).Dot("Oldest").Call()
		}
		body := []jen.Code{
			jen.If(bad).Block(
				jen.Return(store().Dot("Read").Call(jen.Id("from"), jen.Id("to"), jen.Nil())),
			),
			jen.Id("n").Op(":=").Id("to").Op("-").Id("from"),
		}
		for _, f := range m.fields {
			n := jen.Id("n")
			if f.Width != 1 {
				n = jen.Id("n").Op("*").Lit(f.Width)
			}
			body = append(body, jen.Id("dst").Dot(f.Name).Op("=").Qual(statePkg, "Resize").Call(jen.Id("dst").Dot(f.Name), n))
		}
		body = append(body, jen.Return(store().Dot("Read").Call(jen.Id("from"), jen.Id("to"), m.batch("dst"))))
		return jen.Func().Params(r).Id("ReadInto").Params(jen.Id("dst").Op("*").Id(m.typ()), fromTo()).Error().Block(body...)
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
