package gen

import (
	"bytes"
	"fmt"
	"go/format"
	"go/types"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/gpustate/gpustate/contract"
)

const (
	statePkg  = "github.com/gpustate/gpustate/runtime/state"
	implPkg   = "github.com/gpustate/gpustate/runtime/state/stateimpl"
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
func (m *model) typ() string     { return m.c.Type }
func (m *model) head() string    { return contract.GeneratedNames(m.c.Type).Head }
func (m *model) snap() string    { return contract.GeneratedNames(m.c.Type).Snapshot }
func (m *model) spans() string   { return contract.GeneratedNames(m.c.Type).Spans }
func (m *model) layout() string  { return layoutName(m.c.Type) }
func (m *model) read() string    { return readName(m.c.Type) }
func (m *model) toSpans() string { return spansName(m.c.Type) }

func (m *model) ctor() string { return ctorName(m.c.Type) }

// sharedCtorName names the constructor of a state that shares its prefix:
// NewTStateShared, or newTStateShared for an unexported T.
func sharedCtorName(typ string) string { return contract.GeneratedNames(typ).SharedCtor }

// ctorName names the constructor: NewTState, or newTState for an
// unexported T.
func ctorName(typ string) string { return contract.GeneratedNames(typ).Ctor }

// What the contract allows.
func (m *model) mutable() bool  { return mutable(m.c) }
func (m *model) snapshot() bool { return snapshot(m.c) }
func (m *model) history() bool  { return history(m.c) }
func (m *model) bounded() bool  { return bounded(m.c) }

// render writes the file of m: header, layout, the head type and its
// methods, the snapshot type and the spans type.
func render(m *model) ([]byte, error) {
	f := jen.NewFilePathName(m.pkg.Path(), m.pkg.Name())
	f.HeaderComment(Header)
	// The runtime's packages are imported under their names, unless the
	// package declares those names itself.
	for path, name := range map[string]string{statePkg: "state", implPkg: "stateimpl", devicePkg: "device"} {
		if m.pkg.Scope().Lookup(name) != nil {
			f.ImportAlias(path, "gpustate"+name)
		} else {
			f.ImportName(path, name)
		}
	}

	f.Add(m.layoutDecl())
	f.Line()
	f.Add(m.slabDecl())
	f.Line()
	f.Add(m.headDecl())
	for _, d := range m.methodDecls(RecvFunc) {
		f.Line()
		f.Add(d)
	}
	for _, d := range m.methodDecls(RecvHead) {
		f.Line()
		f.Add(d)
	}
	if m.snapshot() {
		f.Line()
		f.Add(m.snapDecl())
		for _, d := range m.methodDecls(RecvSnapshot) {
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
	f.Line()
	f.Add(m.gatherFunc())
	for _, d := range m.handleFuncs() {
		f.Line()
		f.Add(d)
	}
	if m.c.Replay != nil {
		f.Line()
		f.Add(m.stepType())
		if replayed(m.c) {
			f.Line()
			f.Add(m.stepHostType())
		}
	}

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
	fields := make([]contract.Field, len(m.fields))
	for i, f := range m.fields {
		fields[i] = f.Field
	}
	cols := columns(fields)
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
		key("Columns", jen.Index().Add(st("Column")).Custom(multi, cols...)),
		key("Growth", st(growth)),
		key("Bound", bound),
		key("Descendants", st(descendants)),
	}
	if m.c.Window > 0 {
		items = append(items, key("Window", jen.Lit(int(m.c.Window))))
	}
	if m.c.BlockRows > 0 {
		items = append(items, key("BlockRows", jen.Lit(m.c.BlockRows)))
	}
	if m.c.ShareKey != "" {
		items = append(items, key("ShareKey", jen.Lit(m.c.ShareKey)))
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
		items = append(items, key("Checkpoint", jen.Op("&").Add(st("CheckpointPolicy")).Values(policy...)))
	}
	if replayed(m.c) {
		items = append(items, key("Input", jen.Index().Add(st("Column")).Custom(multi, columns(m.c.Replay.Fields)...)))
	}
	// Mandatory is the zero value: only the others are written.
	switch m.c.Retention {
	case contract.RetentionOptional:
		items = append(items, key("Retention", st("Optional")))
	case contract.RetentionReconstructable:
		items = append(items, key("Retention", st("Reconstructable")))
	}
	return doc([]string{
		fmt.Sprintf("%s is how the store holds %s: one column per field, %s.", m.layout(), m.typ(), lawShort(m.c)),
	}).Var().Id(m.layout()).Op("=").Add(st("Layout")).Custom(multi, items...)
}

// columns renders the store columns of fields, one per field.
func columns(fields []contract.Field) []jen.Code {
	cols := make([]jen.Code, len(fields))
	for i, f := range fields {
		cols[i] = jen.Values(
			key("Name", jen.Lit(f.Name)),
			key("ElemSize", jen.Lit(int(f.ElemSize))),
			key("Width", jen.Lit(f.Width)),
		)
	}
	return cols
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
		jen.Id("h").Op("*").Add(st("Head")),
		jen.Id("mem").Add(st("Head")).Comment("where h points, but in a group's member"),
	)
}

// slabDecl declares the slabs the type's handles come from: one allocation
// serves many of them (stateimpl.Slab).
func (m *model) slabDecl() jen.Code {
	defs := []jen.Code{jen.Id(slabName(m.c.Type, "states")).Add(st("Slab")).Types(jen.Id(m.head()))}
	if m.snapshot() {
		defs = append(defs, jen.Id(slabName(m.c.Type, "snapshots")).Add(st("Slab")).Types(jen.Id(m.snap())))
	}
	return jen.Comment("The handles of " + m.typ() + " states and snapshots, carved from larger allocations.").Line().Var().Defs(defs...)
}

// fromSlab renders the body of a call that makes a handle v from slab and
// fills its mem field with fill, a call that returns an error: v's field
// points at mem, and v is returned.
func fromSlab(v, slab, field string, fill jen.Code) []jen.Code {
	return []jen.Code{
		jen.Id(v).Op(":=").Id(slab).Dot("New").Call(),
		jen.If(jen.Err().Op(":=").Add(fill), jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Nil(), jen.Err()),
		),
		jen.Id(v).Dot(field).Op("=").Op("&").Id(v).Dot("mem"),
		jen.Return(jen.Id(v), jen.Nil()),
	}
}

// recv is the head receiver.
func (m *model) recv() *jen.Statement { return jen.Id("s").Op("*").Id(m.head()) }

// snapRecv is the snapshot receiver.
func (m *model) snapRecv() *jen.Statement { return jen.Id("v").Op("*").Id(m.snap()) }

// batch converts the fields of the batch named name to the [][]byte the store takes.
func (m *model) batch(name string) jen.Code {
	cols := make([]jen.Code, len(m.fields))
	for i, f := range m.fields {
		cols[i] = st("Bytes").Call(jen.Id(name).Dot(f.Name))
	}
	if len(cols) > 2 {
		return jen.Index().Index().Byte().Custom(multi, cols...)
	}
	return jen.Index().Index().Byte().Values(cols...)
}

// methodDecls declares the generated functions and methods of receiver
// kind recv, in the order of methodTable, each with its doc comment and
// directive.
func (m *model) methodDecls(recv Recv) []jen.Code {
	var out []jen.Code
	for _, s := range methodTable {
		if s.recv != recv || (s.ok != nil && !s.ok(m.c)) {
			continue
		}
		var dirs []string
		if s.directive != "" {
			dirs = []string{s.directive}
		}
		out = append(out, doc(s.doc(m.c), dirs...).Add(s.code(m)))
	}
	return out
}

// hcall calls the store head's method name, through the helper that
// answers a nil handle with a nil head (whose methods answer
// state.ErrReleased).
func (m *model) hcall(name string, args ...jen.Code) *jen.Statement {
	return m.storeHead().Dot(name).Call(args...)
}

// vcall calls the store snapshot's method name, as hcall does.
func (m *model) vcall(name string, args ...jen.Code) *jen.Statement {
	return m.storeSnap().Dot(name).Call(args...)
}

// headCall renders a head method that returns what the store head's
// method of the same name returns.
func headCall(name string, result jen.Code) func(*model) *jen.Statement {
	return func(m *model) *jen.Statement {
		return jen.Func().Params(m.recv()).Id(name).Params().Add(result).Block(jen.Return(m.hcall(name)))
	}
}

// snapCall is headCall for the snapshot.
func snapCall(name string, result jen.Code) func(*model) *jen.Statement {
	return func(m *model) *jen.Statement {
		return jen.Func().Params(m.snapRecv()).Id(name).Params().Add(result).Block(jen.Return(m.vcall(name)))
	}
}

// headStreamCall renders a head method of one device.Stream that returns
// the runtime's error.
func headStreamCall(name string) func(*model) *jen.Statement {
	return func(m *model) *jen.Statement {
		return jen.Func().Params(m.recv()).Id(name).Params(jen.Id("st").Qual(devicePkg, "Stream")).Error().Block(jen.Return(m.hcall(name, jen.Id("st"))))
	}
}

// snapStreamCall is headStreamCall for the snapshot.
func snapStreamCall(name string) func(*model) *jen.Statement {
	return func(m *model) *jen.Statement {
		return jen.Func().Params(m.snapRecv()).Id(name).Params(jen.Id("st").Qual(devicePkg, "Stream")).Error().Block(jen.Return(m.vcall(name, jen.Id("st"))))
	}
}

// headTableCall renders the head's BlockTable.
func headTableCall(m *model) *jen.Statement {
	return jen.Func().Params(m.recv()).Id("BlockTable").Params().Params(jen.Op("*").Add(st("BlockTable")), jen.Error()).Block(jen.Return(st("Table").Call(m.hcall("BlockTable"))))
}

// snapTableCall renders the snapshot's BlockTable.
func snapTableCall(m *model) *jen.Statement {
	return jen.Func().Params(m.snapRecv()).Id("BlockTable").Params().Params(jen.Op("*").Add(st("BlockTable")), jen.Error()).Block(jen.Return(st("Table").Call(m.vcall("BlockTable"))))
}

// wrapped assigns call's result to field and returns it as *typ{field: field},
// or its error.
func wrapped(typ, field string, call jen.Code) []jen.Code {
	return []jen.Code{
		jen.List(jen.Id(field), jen.Err()).Op(":=").Add(call),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
		jen.Return(jen.Op("&").Id(typ).Values(jen.Dict{jen.Id(field): jen.Id(field)}), jen.Nil()),
	}
}

func (m *model) ctorCode() *jen.Statement {
	return jen.Func().Id(m.ctor()).Params(
		jen.Id("p").Op("*").Add(st("Pool")),
		jen.Id("owner").Add(st("Owner")),
	).Params(jen.Op("*").Id(m.head()), jen.Error()).Block(
		fromSlab("s", slabName(m.c.Type, "states"), "h", st("NewHeadInto").Call(jen.Id("p"), jen.Op("&").Id("s").Dot("mem"), jen.Op("&").Id(m.layout()), jen.Id("owner")))...,
	)
}

func (m *model) sharedCtorCode() *jen.Statement {
	return jen.Func().Id(sharedCtorName(m.typ())).Params(
		jen.Id("p").Op("*").Add(st("Pool")),
		jen.Id("owner").Add(st("Owner")),
		jen.Id("domain").Add(st("Domain")),
	).Params(jen.Op("*").Id(m.head()), jen.Error()).Block(
		fromSlab("s", slabName(m.c.Type, "states"), "h", st("NewSharedHeadInto").Call(jen.Id("p"), jen.Op("&").Id("s").Dot("mem"), jen.Op("&").Id(m.layout()), jen.Id("owner"), jen.Id("domain")))...,
	)
}

// adoptCode renders AdoptPrefix, whose keys are a slice of the key field's
// element type.
func (m *model) adoptCode() *jen.Statement {
	var elem jen.Code = jen.Int64() // not reached: a share line names a field
	for _, f := range m.fields {
		if f.Name == m.c.ShareKey {
			elem = m.typeCode(f.elem)
		}
	}
	return jen.Func().Params(m.recv()).Id("AdoptPrefix").Params(jen.Id("keys").Index().Add(elem)).Params(jen.Int(), jen.Error()).Block(
		jen.Return(m.hcall("AdoptPrefix", st("Bytes").Call(jen.Id("keys")))),
	)
}

func (m *model) appendCode() *jen.Statement {
	return jen.Func().Params(m.recv()).Id("Append").Params(jen.Id("rows").Id(m.typ())).Error().Block(
		jen.Return(m.hcall("Append", m.batch("rows"))),
	)
}

func (m *model) writeCode() *jen.Statement {
	return jen.Func().Params(m.recv()).Id("Write").Params(jen.Id("at").Int(), jen.Id("rows").Id(m.typ())).Error().Block(
		jen.Return(m.hcall("Write", jen.Id("at"), m.batch("rows"))),
	)
}

// fromTo is the parameter list (from, to int).
func fromTo() *jen.Statement { return jen.List(jen.Id("from"), jen.Id("to")).Int() }

func (m *model) headReadCode() *jen.Statement {
	return jen.Func().Params(m.recv()).Id("Read").Params(fromTo()).Params(jen.Id(m.typ()), jen.Error()).Block(
		jen.Return(jen.Id(m.read()).Call(m.storeHead(), jen.Id("from"), jen.Id("to"))),
	)
}

func (m *model) snapshotCode() *jen.Statement {
	return jen.Func().Params(m.recv()).Id("Snapshot").Params().Params(jen.Op("*").Id(m.snap()), jen.Error()).Block(
		fromSlab("v", slabName(m.c.Type, "snapshots"), "snap", m.hcall("SnapshotInto", jen.Op("&").Id("v").Dot("mem")))...,
	)
}

func (m *model) branchCode() *jen.Statement {
	return jen.Func().Params(m.recv()).Id("Branch").Params().Params(jen.Op("*").Id(m.head()), jen.Error()).Block(
		fromSlab("c", slabName(m.c.Type, "states"), "h", m.hcall("BranchInto", jen.Op("&").Id("c").Dot("mem")))...,
	)
}

func (m *model) mergeCode() *jen.Statement {
	return jen.Func().Params(m.recv()).Id("Merge").Params(jen.Id("child").Op("*").Id(m.head())).Error().Block(
		jen.Var().Id("c").Op("*").Add(st("Head")),
		jen.If(jen.Id("child").Op("!=").Nil()).Block(jen.Id("c").Op("=").Id("child").Dot("h")),
		jen.Return(m.hcall("Merge", jen.Id("c"))),
	)
}

func (m *model) rollbackCode() *jen.Statement {
	return jen.Func().Params(m.recv()).Id("Rollback").Params(jen.Id("to").Op("*").Id(m.snap())).Error().Block(
		jen.Var().Id("snap").Op("*").Add(st("Snap")),
		jen.If(jen.Id("to").Op("!=").Nil()).Block(jen.Id("snap").Op("=").Id("to").Dot("snap")),
		jen.Return(m.hcall("Rollback", jen.Id("snap"))),
	)
}

func (m *model) atCode() *jen.Statement {
	return jen.Func().Params(m.recv()).Id("At").Params(jen.Id("v").Add(st("Version"))).Params(jen.Op("*").Id(m.snap()), jen.Error()).Block(
		wrapped(m.snap(), "snap", m.hcall("At", jen.Id("v")))...,
	)
}

func (m *model) versionAtCode() *jen.Statement {
	return jen.Func().Params(m.recv()).Id("VersionAt").Params(jen.Id("n").Int()).Params(st("Version"), jen.Error()).Block(
		jen.Return(m.hcall("VersionAt", jen.Id("n"))),
	)
}

func (m *model) planCode() *jen.Statement {
	return jen.Func().Params(m.recv()).Id("Plan").Params(jen.Id("v").Add(st("Version"))).Params(st("Plan"), jen.Error()).Block(
		jen.Return(m.hcall("Plan", jen.Id("v"))),
	)
}

func (m *model) appendDeviceCode() *jen.Statement {
	return jen.Func().Params(m.recv()).Id("AppendDevice").Params(jen.Id("n").Int()).Params(jen.Id(m.spans()), jen.Error()).Block(
		jen.Return(jen.Id(m.toSpans()).Call(m.hcall("AppendDevice", jen.Id("n")))),
	)
}

func (m *model) appendAsyncCode() *jen.Statement {
	return jen.Func().Params(m.recv()).Id("AppendAsync").Params(jen.Id("st").Qual(devicePkg, "Stream"), jen.Id("rows").Id(m.typ())).Error().Block(
		jen.Return(m.hcall("AppendAsync", jen.Id("st"), m.batch("rows"))),
	)
}

func (m *model) writeDeviceCode() *jen.Statement {
	return jen.Func().Params(m.recv()).Id("WriteDevice").Params(fromTo()).Params(jen.Id(m.spans()), jen.Error()).Block(
		jen.Return(jen.Id(m.toSpans()).Call(m.hcall("WriteDevice", jen.Id("from"), jen.Id("to")))),
	)
}

func (m *model) headSpansCode() *jen.Statement {
	return jen.Func().Params(m.recv()).Id("Spans").Params(fromTo()).Params(jen.Id(m.spans()), jen.Error()).Block(
		jen.Return(jen.Id(m.toSpans()).Call(m.hcall("Spans", jen.Id("from"), jen.Id("to")))),
	)
}

func (m *model) snapReadCode() *jen.Statement {
	return jen.Func().Params(m.snapRecv()).Id("Read").Params(fromTo()).Params(jen.Id(m.typ()), jen.Error()).Block(
		jen.Return(jen.Id(m.read()).Call(m.storeSnap(), jen.Id("from"), jen.Id("to"))),
	)
}

func (m *model) snapSpansCode() *jen.Statement {
	return jen.Func().Params(m.snapRecv()).Id("Spans").Params(fromTo()).Params(jen.Id(m.spans()), jen.Error()).Block(
		jen.Return(jen.Id(m.toSpans()).Call(m.vcall("Spans", jen.Id("from"), jen.Id("to")))),
	)
}

// snapDecl declares the snapshot type.
func (m *model) snapDecl() jen.Code {
	return doc([]string{
		fmt.Sprintf("%s is an immutable version of %s state: what it reads never changes, whatever happens later to the state, its branches or the pool. Its spans are read only, by contract.", m.snap(), article(m.typ())),
	}, "snapshot").Type().Id(m.snap()).Struct(
		jen.Id("snap").Op("*").Add(st("Snap")),
		jen.Id("mem").Add(st("Snap")).Comment("where snap points for a snapshot made by Snapshot"),
	)
}

// spansDecl declares the spans type.
func (m *model) spansDecl() jen.Code {
	fields := make([]jen.Code, len(m.fields))
	for i, f := range m.fields {
		fields[i] = jen.Id(f.Name).Index().Qual(devicePkg, "Span")
	}
	return doc([]string{
		fmt.Sprintf("%s locates rows of %s state in device memory: for each field, one span per block the rows lie in, in row order.", m.spans(), article(m.typ())),
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

// implNames are the runtime names generated code takes from package
// stateimpl; every other runtime name it takes from runtime/state.
var implNames = map[string]bool{
	"Head": true, "Snap": true, "Group": true, "GroupSnap": true, "Layout": true, "Column": true,
	"CheckpointPolicy": true, "Append": true, "Mutable": true, "Optional": true,
	"Reconstructable": true, "Invalidate": true, "Keep": true, "Resize": true, "NewHead": true, "Stepper": true, "HostStepper": true, "Scratch": true,
	"NewSharedHead": true, "NewHeadInto": true, "NewSharedHeadInto": true, "Slab": true, "NewGroup": true, "NewSharedGroup": true, "Table": true,
}

// st qualifies a runtime name with its package, stateimpl or runtime/state.
func st(name string) *jen.Statement {
	if implNames[name] {
		return jen.Qual(implPkg, name)
	}
	return jen.Qual(statePkg, name)
}
