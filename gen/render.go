package gen

import (
	"bytes"
	"fmt"
	"go/format"
	"go/token"
	"go/types"
	"strings"
	"unicode"

	"github.com/dave/jennifer/jen"

	"github.com/gpustate/gpustate/contract"
)

const (
	statePkg  = "github.com/gpustate/gpustate/runtime/state"
	devicePkg = "github.com/gpustate/gpustate/runtime/device"
)

// A model is one contract ready to render: the contract and the Go element
// type of each of its fields.
type model struct {
	c      *contract.Contract
	pkg    *types.Package
	fields []column
}

// A column is one field of a state type: one column of the store.
type column struct {
	contract.Field
	elem types.Type
}

// Names of what is generated for the type.
func (m *model) typ() string    { return m.c.Type }
func (m *model) head() string   { return m.c.Type + "State" }
func (m *model) snap() string   { return m.c.Type + "Snapshot" }
func (m *model) spans() string  { return m.c.Type + "Spans" }
func (m *model) layout() string { return lowerFirst(m.c.Type) + "Layout" }
func (m *model) read() string   { return "read" + upperFirst(m.c.Type) }
func (m *model) toSpans() string {
	return "make" + upperFirst(m.c.Type) + "Spans"
}

// ctor names the constructor: NewTState, or newTState for an unexported T.
func (m *model) ctor() string {
	if token.IsExported(m.c.Type) {
		return "New" + m.c.Type + "State"
	}
	return "new" + upperFirst(m.c.Type) + "State"
}

// What the contract allows.
func (m *model) appends() bool  { return m.c.Growth == contract.GrowthAppend }
func (m *model) mutable() bool  { return m.c.Growth == contract.GrowthMutable }
func (m *model) snapshot() bool { return m.c.Snapshot == contract.SnapshotImmutable }
func (m *model) branch() bool   { return m.c.Branch == contract.BranchIsolated }
func (m *model) merge() bool    { return m.branch() && m.c.Merge == contract.MergeFastforward }
func (m *model) rollback() bool { return m.snapshot() && m.c.Rollback }
func (m *model) history() bool  { return m.snapshot() && m.c.Checkpoint != nil }
func (m *model) bounded() bool  { return !m.c.Unbounded && m.c.Bound > 0 }

// render writes the file of m: header, layout, the head type and its
// methods, the snapshot type and the spans type.
func render(m *model) ([]byte, error) {
	f := jen.NewFilePathName(m.pkg.Path(), m.pkg.Name())
	f.HeaderComment(Header)
	// The runtime's packages are imported under their names, unless the
	// package declares those names itself.
	for path, name := range map[string]string{statePkg: "state", devicePkg: "device"} {
		if m.pkg.Scope().Lookup(name) != nil {
			f.ImportAlias(path, "gpustate"+name)
		} else {
			f.ImportName(path, name)
		}
	}

	f.Add(m.layoutDecl())
	f.Line()
	f.Add(m.headDecl())
	f.Line()
	f.Add(m.ctorDecl())
	for _, d := range m.headMethods() {
		f.Line()
		f.Add(d)
	}
	if m.snapshot() {
		f.Line()
		f.Add(m.snapDecl())
		for _, d := range m.snapMethods() {
			f.Line()
			f.Add(d)
		}
	}
	f.Line()
	f.Add(m.spansDecl())
	f.Line()
	f.Add(m.spansFunc())
	f.Line()
	f.Add(m.readFunc())

	var buf bytes.Buffer
	if err := f.Render(&buf); err != nil {
		return nil, err
	}
	return groupImports(buf.Bytes())
}

// groupImports puts the standard library's imports first, in a group of
// their own, as goimports does; jennifer sorts all imports in one group.
func groupImports(src []byte) ([]byte, error) {
	start := bytes.Index(src, []byte("\nimport (\n"))
	if start < 0 {
		return src, nil
	}
	start += len("\nimport (\n")
	end := start + bytes.Index(src[start:], []byte("\n)\n"))
	var std, other []string
	for _, line := range strings.Split(string(src[start:end]), "\n") {
		path := strings.Trim(strings.TrimSpace(line[strings.LastIndexByte(line, ' ')+1:]), `"`)
		if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
			other = append(other, line)
		} else {
			std = append(std, line)
		}
	}
	if len(std) == 0 || len(other) == 0 {
		return src, nil
	}
	block := strings.Join(std, "\n") + "\n\n" + strings.Join(other, "\n")
	out := append(append(append([]byte(nil), src[:start]...), block...), src[end:]...)
	return format.Source(out)
}

// doc renders a doc comment: paragraphs of prose, then the directives, each
// on its own line after an empty comment line.
func doc(paragraphs []string, directives ...string) *jen.Statement {
	s := jen.Null()
	for i, p := range paragraphs {
		if i > 0 {
			s.Comment("").Line()
		}
		for _, line := range wrap(p, 76) {
			s.Comment(line).Line()
		}
	}
	if len(directives) > 0 {
		if len(paragraphs) > 0 {
			s.Comment("").Line()
		}
		for _, d := range directives {
			s.Comment("//state:" + d).Line()
		}
	}
	return s
}

// layoutDecl declares the store layout of the type.
func (m *model) layoutDecl() jen.Code {
	cols := make([]jen.Code, len(m.fields))
	for i, f := range m.fields {
		cols[i] = jen.Values(
			key("Name", jen.Lit(f.Name)),
			key("ElemSize", jen.Lit(int(f.ElemSize))),
			key("Width", jen.Lit(f.Width)),
		)
	}
	growth := "Append"
	if m.mutable() {
		growth = "Mutable"
	}
	descendants := "Invalidate"
	if m.c.Descendants == contract.DescendantsKeep {
		descendants = "Keep"
	}
	bound := jen.Lit(0)
	if m.bounded() {
		bound = jen.Lit(int(m.c.Bound))
	}
	items := []jen.Code{
		key("Type", jen.Lit(m.typ())),
		key("Columns", jen.Index().Qual(statePkg, "Column").Custom(multi, cols...)),
		key("Growth", jen.Qual(statePkg, growth)),
		key("Bound", bound),
		key("Descendants", jen.Qual(statePkg, descendants)),
	}
	if cp := m.c.Checkpoint; m.history() {
		// Exactly one of Every and Budget is set: write only that one.
		var policy []jen.Code
		if cp.Budget != 0 {
			policy = append(policy, key("Budget", jen.Lit(cp.Budget)))
		} else {
			policy = append(policy, key("Every", jen.Lit(cp.Every)))
		}
		policy = append(policy, key("Keep", jen.Lit(cp.Keep)))
		items = append(items, key("Checkpoint", jen.Op("&").Qual(statePkg, "CheckpointPolicy").Values(policy...)))
	}
	return doc([]string{
		fmt.Sprintf("%s is how the store holds %s: one column per field, %s.", m.layout(), m.typ(), m.lawShort()),
	}).Var().Id(m.layout()).Op("=").Qual(statePkg, "Layout").Custom(multi, items...)
}

// multi renders a composite literal's elements one per line.
var multi = jen.Options{Open: "{", Close: "}", Separator: ",", Multi: true}

// key renders one keyed element of a composite literal.
func key(name string, value jen.Code) jen.Code {
	return jen.Id(name).Op(":").Add(value)
}

// headDecl declares the head type, with the contract in its doc comment.
func (m *model) headDecl() jen.Code {
	paras := []string{fmt.Sprintf("%s is a live %s state%s", m.head(), m.typ(), m.purpose())}
	paras = append(paras, m.contractProse()...)
	return doc(paras).Type().Id(m.head()).Struct(
		jen.Id("h").Op("*").Qual(statePkg, "Head"),
	)
}

// ctorDecl declares the constructor.
func (m *model) ctorDecl() jen.Code {
	var first string
	if m.mutable() {
		first = fmt.Sprintf("%s creates a %s state of %d rows, all zero, in pool p, owned by owner (a %s).", m.ctor(), m.typ(), m.c.Bound, m.c.Owner)
	} else {
		first = fmt.Sprintf("%s creates an empty %s state in pool p, owned by owner (a %s).", m.ctor(), m.typ(), m.c.Owner)
	}
	first += " The owner alone writes the state; its blocks are never shared with another owner's."
	paras := []string{first, m.releaseDuty("state")}
	return doc(paras, "acquire").Func().Id(m.ctor()).Params(
		jen.Id("p").Op("*").Qual(statePkg, "Pool"),
		jen.Id("owner").Qual(statePkg, "Owner"),
	).Params(jen.Op("*").Id(m.head()), jen.Error()).Block(
		jen.List(jen.Id("h"), jen.Err()).Op(":=").Id("p").Dot("NewHead").Call(jen.Op("&").Id(m.layout()), jen.Id("owner")),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
		jen.Return(jen.Op("&").Id(m.head()).Values(jen.Dict{jen.Id("h"): jen.Id("h")}), jen.Nil()),
	)
}

// recv is the head receiver.
func (m *model) recv() *jen.Statement { return jen.Id("s").Op("*").Id(m.head()) }

// snapRecv is the snapshot receiver.
func (m *model) snapRecv() *jen.Statement { return jen.Id("v").Op("*").Id(m.snap()) }

// batch converts the fields of the batch named name to the [][]byte the store takes.
func (m *model) batch(name string) jen.Code {
	cols := make([]jen.Code, len(m.fields))
	for i, f := range m.fields {
		cols[i] = jen.Qual(statePkg, "Bytes").Call(jen.Id(name).Dot(f.Name))
	}
	if len(cols) > 2 {
		return jen.Index().Index().Byte().Custom(multi, cols...)
	}
	return jen.Index().Index().Byte().Values(cols...)
}

func (m *model) headMethods() []jen.Code {
	var out []jen.Code
	call := func(name string, args ...jen.Code) *jen.Statement {
		return jen.Id("s").Dot("h").Dot(name).Call(args...)
	}
	if m.appends() {
		out = append(out, doc(m.appendDoc(), "appends").
			Func().Params(m.recv()).Id("Append").Params(jen.Id("rows").Id(m.typ())).Error().Block(
			jen.Return(call("Append", m.batch("rows"))),
		))
	}
	if m.mutable() {
		out = append(out, doc(m.writeDoc(), "mutates").
			Func().Params(m.recv()).Id("Write").Params(jen.Id("at").Int(), jen.Id("rows").Id(m.typ())).Error().Block(
			jen.Return(call("Write", jen.Id("at"), m.batch("rows"))),
		))
	}
	out = append(out, doc([]string{
		fmt.Sprintf("Read copies rows [from, to) of the state to the host, in a new %s. It returns state.ErrRange unless 0 <= from <= to <= Len().", m.typ()),
	}).Func().Params(m.recv()).Id("Read").Params(jen.List(jen.Id("from"), jen.Id("to")).Int()).Params(jen.Id(m.typ()), jen.Error()).Block(
		jen.Return(jen.Id(m.read()).Call(jen.Id("s").Dot("h"), jen.Id("from"), jen.Id("to"))),
	))
	lenDoc := "Len returns the number of rows the state holds."
	if m.mutable() {
		lenDoc = fmt.Sprintf("Len returns the number of rows the state holds: always %d.", m.c.Bound)
	}
	out = append(out, doc([]string{lenDoc}).Func().Params(m.recv()).Id("Len").Params().Int().Block(jen.Return(call("Len"))))
	boundDoc := fmt.Sprintf("Bound returns the most rows the state may hold: %d.", m.c.Bound)
	if m.mutable() {
		boundDoc = fmt.Sprintf("Bound returns the number of rows the state has: %d.", m.c.Bound)
	} else if !m.bounded() {
		boundDoc = "Bound returns the most rows the state may hold: 0, as the contract sets no bound."
	}
	out = append(out, doc([]string{boundDoc}).Func().Params(m.recv()).Id("Bound").Params().Int().Block(jen.Return(call("Bound"))))
	out = append(out, doc([]string{
		"Version returns the state's current version. Every successful write makes a new version, larger than every version the state's lineage has seen.",
	}).Func().Params(m.recv()).Id("Version").Params().Qual(statePkg, "Version").Block(jen.Return(call("Version"))))

	if m.snapshot() {
		p := "Snapshot returns the state's current version as an immutable snapshot, in O(1): no rows are copied. Later writes to the state or its branches never change what the snapshot reads, and it stays readable after the state is released"
		if m.rollback() && m.c.Descendants == contract.DescendantsInvalidate {
			p += ", until a Rollback abandons the line it belongs to (it then answers state.ErrInvalidated)"
		}
		p += "."
		out = append(out, doc([]string{p, m.releaseDuty("snapshot")}, "acquire").
			Func().Params(m.recv()).Id("Snapshot").Params().Params(jen.Op("*").Id(m.snap()), jen.Error()).Block(
			jen.List(jen.Id("snap"), jen.Err()).Op(":=").Add(call("Snapshot")),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
			jen.Return(jen.Op("&").Id(m.snap()).Values(jen.Dict{jen.Id("snap"): jen.Id("snap")}), jen.Nil()),
		))
	}
	if m.branch() {
		p := "Branch returns a new head at the state's version and content, for the same owner. The branches are isolated: writes to one are invisible to the other and to every sibling, while the rows they share are stored once."
		if m.merge() {
			p += " A branch comes back by Merge, as a fast-forward."
		} else {
			p += " Branches are never merged back (merge=unsupported)."
		}
		out = append(out, doc([]string{p, m.releaseDuty("branch")}, "acquire").
			Func().Params(m.recv()).Id("Branch").Params().Params(jen.Op("*").Id(m.head()), jen.Error()).Block(
			jen.List(jen.Id("h"), jen.Err()).Op(":=").Add(call("Branch")),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
			jen.Return(jen.Op("&").Id(m.head()).Values(jen.Dict{jen.Id("h"): jen.Id("h")}), jen.Nil()),
		))
	}
	if m.merge() {
		out = append(out, doc([]string{
			"Merge makes the state take child's content and version, as a fast-forward: the state must not have changed since child was branched from it, else Merge returns state.ErrDiverged and changes nothing. The child stays live and must still be released.",
		}, "mutates").Func().Params(m.recv()).Id("Merge").Params(jen.Id("child").Op("*").Id(m.head())).Error().Block(
			jen.Var().Id("c").Op("*").Qual(statePkg, "Head"),
			jen.If(jen.Id("child").Op("!=").Nil()).Block(jen.Id("c").Op("=").Id("child").Dot("h")),
			jen.Return(call("Merge", jen.Id("c"))),
		))
	}
	if m.rollback() {
		p := "Rollback moves the state back to the version of snapshot to, which must be an ancestor of the state's version (else state.ErrNotAncestor) taken by the same owner (else state.ErrOwner). Afterwards the state reads as to and has to's version."
		if m.c.Descendants == contract.DescendantsInvalidate {
			p += " Snapshots and branches taken from the abandoned line then answer state.ErrInvalidated (descendants=invalidate)."
		} else {
			p += " Snapshots and branches taken from the abandoned line stay readable (descendants=keep)."
		}
		out = append(out, doc([]string{p}, "mutates").
			Func().Params(m.recv()).Id("Rollback").Params(jen.Id("to").Op("*").Id(m.snap())).Error().Block(
			jen.Var().Id("snap").Op("*").Qual(statePkg, "Snap"),
			jen.If(jen.Id("to").Op("!=").Nil()).Block(jen.Id("snap").Op("=").Id("to").Dot("snap")),
			jen.Return(call("Rollback", jen.Id("snap"))),
		))
	}
	if m.history() {
		out = append(out, doc([]string{
			fmt.Sprintf("At reconstructs version v of the state's own history from the cheapest checkpoint plus the writes after it (%s). It returns state.ErrNotRetained when the history no longer holds v.", m.checkpointShort()),
			m.releaseDuty("snapshot"),
		}, "acquire").Func().Params(m.recv()).Id("At").Params(jen.Id("v").Qual(statePkg, "Version")).Params(jen.Op("*").Id(m.snap()), jen.Error()).Block(
			jen.List(jen.Id("snap"), jen.Err()).Op(":=").Add(call("At", jen.Id("v"))),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
			jen.Return(jen.Op("&").Id(m.snap()).Values(jen.Dict{jen.Id("snap"): jen.Id("snap")}), jen.Nil()),
		))
		out = append(out, doc([]string{
			"Plan explains how At would reconstruct version v: the checkpoint it would start from, the writes it would replay and the estimated cost. It reconstructs nothing.",
		}).Func().Params(m.recv()).Id("Plan").Params(jen.Id("v").Qual(statePkg, "Version")).Params(jen.Qual(statePkg, "Plan"), jen.Error()).Block(
			jen.Return(call("Plan", jen.Id("v"))),
		))
	}
	out = append(out, doc([]string{
		"Stats reports the state's version, rows, logical bytes (the rows it reads as) and physical bytes (the blocks it holds, shared ones included).",
	}).Func().Params(m.recv()).Id("Stats").Params().Qual(statePkg, "Stats").Block(jen.Return(call("Stats"))))

	if m.appends() {
		p := "AppendDevice appends n rows for a kernel to fill and returns where they live. The rows belong to a new version at once; the spans are the caller's to write until the next call on the state."
		if m.bounded() {
			p += fmt.Sprintf(" It returns state.ErrBound, and appends nothing, when n rows would pass the bound of %d.", m.c.Bound)
		}
		out = append(out, doc([]string{p}, "appends").
			Func().Params(m.recv()).Id("AppendDevice").Params(jen.Id("n").Int()).Params(jen.Id(m.spans()), jen.Error()).Block(
			jen.Return(jen.Id(m.toSpans()).Call(call("AppendDevice", jen.Id("n")))),
		))
	}
	if m.mutable() {
		out = append(out, doc([]string{
			fmt.Sprintf("WriteDevice hands out rows [from, to) for a kernel to write in place, in a new version. Blocks shared with snapshots or branches are copied first, so they never see the writes; the spans are the caller's to write until the next call on the state. It returns state.ErrRange unless 0 <= from <= to <= %d.", m.c.Bound),
		}, "mutates").Func().Params(m.recv()).Id("WriteDevice").Params(jen.List(jen.Id("from"), jen.Id("to")).Int()).Params(jen.Id(m.spans()), jen.Error()).Block(
			jen.Return(jen.Id(m.toSpans()).Call(call("WriteDevice", jen.Id("from"), jen.Id("to")))),
		))
	}
	writeVia := "AppendDevice"
	if m.mutable() {
		writeVia = "WriteDevice"
	}
	out = append(out, doc([]string{
		fmt.Sprintf("Spans locates rows [from, to) in device memory, for kernels that read them. The blocks may be shared with snapshots and branches: write rows through %s, never through these spans.", writeVia),
	}, "view").Func().Params(m.recv()).Id("Spans").Params(jen.List(jen.Id("from"), jen.Id("to")).Int()).Params(jen.Id(m.spans()), jen.Error()).Block(
		jen.Return(jen.Id(m.toSpans()).Call(call("Spans", jen.Id("from"), jen.Id("to")))),
	))

	rel := "Release gives the state's blocks back to the pool"
	if m.snapshot() {
		rel += "; snapshots taken from it stay readable"
	}
	rel += ". Release is idempotent; every other method of a released state returns state.ErrReleased."
	if m.c.Cleanup != "" {
		rel += fmt.Sprintf(" The contract names %s as the event on which the owner releases it.", m.c.Cleanup)
	}
	out = append(out, doc([]string{rel}, "release").
		Func().Params(m.recv()).Id("Release").Params().Error().Block(jen.Return(call("Release"))))
	return out
}

// snapDecl declares the snapshot type.
func (m *model) snapDecl() jen.Code {
	return doc([]string{
		fmt.Sprintf("%s is an immutable version of a %s state: what it reads never changes, whatever happens later to the state, its branches or the pool. Its spans are read only, by contract.", m.snap(), m.typ()),
	}, "snapshot").Type().Id(m.snap()).Struct(
		jen.Id("snap").Op("*").Qual(statePkg, "Snap"),
	)
}

func (m *model) snapMethods() []jen.Code {
	call := func(name string, args ...jen.Code) *jen.Statement {
		return jen.Id("v").Dot("snap").Dot(name).Call(args...)
	}
	return []jen.Code{
		doc([]string{
			fmt.Sprintf("Read copies rows [from, to) of the snapshot to the host, in a new %s. It returns state.ErrRange unless 0 <= from <= to <= Len().", m.typ()),
		}).Func().Params(m.snapRecv()).Id("Read").Params(jen.List(jen.Id("from"), jen.Id("to")).Int()).Params(jen.Id(m.typ()), jen.Error()).Block(
			jen.Return(jen.Id(m.read()).Call(jen.Id("v").Dot("snap"), jen.Id("from"), jen.Id("to"))),
		),
		doc([]string{
			"Spans locates rows [from, to) of the snapshot in device memory, for kernels that read them. They are read only, by contract: the blocks are shared with the state and its branches, and statevet reports a write through them.",
		}, "view").Func().Params(m.snapRecv()).Id("Spans").Params(jen.List(jen.Id("from"), jen.Id("to")).Int()).Params(jen.Id(m.spans()), jen.Error()).Block(
			jen.Return(jen.Id(m.toSpans()).Call(call("Spans", jen.Id("from"), jen.Id("to")))),
		),
		doc([]string{"Len returns the number of rows in the snapshot."}).
			Func().Params(m.snapRecv()).Id("Len").Params().Int().Block(jen.Return(call("Len"))),
		doc([]string{"Version returns the version the snapshot holds."}).
			Func().Params(m.snapRecv()).Id("Version").Params().Qual(statePkg, "Version").Block(jen.Return(call("Version"))),
		doc([]string{"Release gives the snapshot's hold on its blocks back to the pool. Release is idempotent; every other method of a released snapshot returns state.ErrReleased."}, "release").
			Func().Params(m.snapRecv()).Id("Release").Params().Error().Block(jen.Return(call("Release"))),
	}
}

// spansDecl declares the spans type.
func (m *model) spansDecl() jen.Code {
	fields := make([]jen.Code, len(m.fields))
	for i, f := range m.fields {
		fields[i] = jen.Id(f.Name).Index().Qual(devicePkg, "Span")
	}
	return doc([]string{
		fmt.Sprintf("%s locates rows of a %s state in device memory: for each field, one span per block the rows lie in, in row order.", m.spans(), m.typ()),
	}).Type().Id(m.spans()).Struct(fields...)
}

// spansFunc declares the conversion from the store's per-column spans.
func (m *model) spansFunc() jen.Code {
	name := m.toSpans()
	d := make([]jen.Code, len(m.fields))
	for i, f := range m.fields {
		d[i] = key(f.Name, jen.Id("cols").Index(jen.Lit(i)))
	}
	return doc([]string{
		fmt.Sprintf("%s names the store's per-column spans by field.", name),
	}).Func().Id(name).Params(
		jen.Id("cols").Index().Index().Qual(devicePkg, "Span"),
		jen.Err().Error(),
	).Params(jen.Id(m.spans()), jen.Error()).Block(
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Id(m.spans()).Values(), jen.Err())),
		jen.Return(jen.Id(m.spans()).Values(d...), jen.Nil()),
	)
}

// readFunc declares the typed read shared by the head and the snapshot.
func (m *model) readFunc() jen.Code {
	d := make([]jen.Code, len(m.fields))
	for i, f := range m.fields {
		n := jen.Id("n")
		if f.Width != 1 {
			n = jen.Id("n").Op("*").Lit(f.Width)
		}
		d[i] = key(f.Name, jen.Make(jen.Index().Add(m.typeCode(f.elem)), n))
	}
	return doc([]string{
		fmt.Sprintf("%s copies rows [from, to) of r, a head or a snapshot, into a new %s. A range outside [0, r.Len()] is left to r.Read to report, so that it never sizes the batch.", m.read(), m.typ()),
	}).Func().Id(m.read()).Params(
		jen.Id("r").Interface(
			jen.Id("Len").Params().Int(),
			jen.Id("Read").Params(jen.List(jen.Id("from"), jen.Id("to")).Int(), jen.Id("dst").Index().Index().Byte()).Error(),
		),
		jen.List(jen.Id("from"), jen.Id("to")).Int(),
	).Params(jen.Id(m.typ()), jen.Error()).Block(
		jen.If(jen.Id("from").Op("<").Lit(0).Op("||").Id("to").Op("<").Id("from").Op("||").Id("to").Op(">").Id("r").Dot("Len").Call()).Block(
			jen.Return(jen.Id(m.typ()).Values(), jen.Id("r").Dot("Read").Call(jen.Id("from"), jen.Id("to"), jen.Nil())),
		),
		jen.Id("n").Op(":=").Id("to").Op("-").Id("from"),
		jen.Id("rows").Op(":=").Id(m.typ()).Custom(multi, d...),
		jen.If(jen.Err().Op(":=").Id("r").Dot("Read").Call(jen.Id("from"), jen.Id("to"), m.batch("rows")), jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Id(m.typ()).Values(), jen.Err()),
		),
		jen.Return(jen.Id("rows"), jen.Nil()),
	)
}

// typeCode renders type t as seen from the generated file's package.
func (m *model) typeCode(t types.Type) jen.Code {
	switch t := t.(type) {
	case *types.Basic:
		return jen.Id(t.Name())
	case *types.Array:
		return jen.Index(jen.Lit(int(t.Len()))).Add(m.typeCode(t.Elem()))
	case *types.Alias:
		return m.objCode(t.Obj(), t.TypeArgs())
	case *types.Named:
		return m.objCode(t.Obj(), t.TypeArgs())
	}
	// Not reached for a valid contract: package contract accepts only the
	// kinds above as field elements.
	return jen.Id(types.TypeString(t, types.RelativeTo(m.pkg)))
}

func (m *model) objCode(obj *types.TypeName, args *types.TypeList) jen.Code {
	var s *jen.Statement
	if obj.Pkg() == nil || obj.Pkg() == m.pkg {
		s = jen.Id(obj.Name())
	} else {
		s = jen.Qual(obj.Pkg().Path(), obj.Name())
	}
	if args.Len() > 0 {
		codes := make([]jen.Code, args.Len())
		for i := range args.Len() {
			codes[i] = m.typeCode(args.At(i))
		}
		s = s.Types(codes...)
	}
	return s
}

// upperFirst upper-cases the first letter of s.
func upperFirst(s string) string {
	r := []rune(s)
	if len(r) > 0 {
		r[0] = unicode.ToUpper(r[0])
	}
	return string(r)
}

// lowerFirst lower-cases the leading capitals of an exported name, the way
// Go names an unexported counterpart: KVCache -> kvCache, Buffer -> buffer,
// URL -> url.
func lowerFirst(s string) string {
	r := []rune(s)
	n := 0
	for n < len(r) && unicode.IsUpper(r[n]) {
		n++
	}
	switch {
	case n == 0:
		return s
	case n == 1 || n == len(r):
	default:
		// The last capital of a run starts the next word: KVCache -> kv + Cache.
		if unicode.IsLower(r[n]) {
			n--
		}
	}
	for i := range n {
		r[i] = unicode.ToLower(r[i])
	}
	return string(r)
}
