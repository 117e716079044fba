package gen

import (
	"fmt"
	"go/types"

	"github.com/dave/jennifer/jen"

	"github.com/gpustate/gpustate/contract"
)

// Step, for contracts with a //state:replay line: a version made by a
// step function whose history keeps the input and the function, not the
// rows it wrote (docs/STATEGEN.md).

// replayed reports whether c keeps its history as inputs: a replay line
// on a state with checkpoints (contract checks the rest).
func replayed(c *contract.Contract) bool {
	return c.Replay != nil && mutable(c) && history(c) && len(c.Replay.Fields) > 0
}

func stepDoc(c *contract.Contract) []string {
	verify := "Replays are not checked: a step function that computes other rows from the same rows and input makes At return other rows than the step did."
	if c.Replay.Verify {
		verify = "Each step records a 64-bit hash of the rows it produced (verify=hash), and a reconstruction whose rows hash otherwise answers state.ErrReplayDiverged and keeps nothing."
	}
	return []string{
		fmt.Sprintf("Step makes a new version by running f on the state's rows in place: dst locates every row, and f computes the next rows from them and in. Blocks a snapshot, a branch or a checkpoint still holds are copied first, and no others. The history keeps in and f, not the rows f wrote, so At and Rollback rebuild the version by running f on in again (%s); f must compute the same rows from the same rows and input, must not keep or change in, and must not call any state: a replay may run while a call holds every state of its group.", checkpointShort(c.Checkpoint)),
		fmt.Sprintf("When f fails, Step returns an error wrapping f's and the state is as before, even if f wrote rows: the version before is rebuilt from its last checkpoint by replay. %s", verify),
	}
}

// stepInput renders a step's input both ways: in, the typed input, as
// the store's batch of columns, and the batch cols as the typed input
// again, for the step function.
func (m *model) stepInput() (batch, input *jen.Statement) {
	cols := make([]jen.Code, len(m.c.Replay.Fields))
	fields := make([]jen.Code, len(m.c.Replay.Fields))
	for i, f := range m.c.Replay.Fields {
		cols[i] = st("Bytes").Call(jen.Id("in").Dot(f.Name))
		fields[i] = key(f.Name, st("Rows").Types(m.inputElem(f.Name)).Call(jen.Id("cols").Index(jen.Lit(i))))
	}
	batch = jen.Index().Index().Byte().Values(cols...)
	if len(cols) > 2 {
		batch = jen.Index().Index().Byte().Custom(multi, cols...)
	}
	input = jen.Id(m.c.Replay.Input).Values(fields...)
	if len(fields) > 2 {
		input = jen.Id(m.c.Replay.Input).Custom(multi, fields...)
	}
	return batch, input
}

// stepCode renders Step: the typed input and spans over the store's
// StepWith, f handed over as the file's step type (stepType).
func (m *model) stepCode() *jen.Statement {
	in := m.c.Replay.Input
	batch, _ := m.stepInput()
	fn := jen.Func().Params(jen.Id("dst").Id(m.spans()), jen.Id("in").Id(in)).Error()
	// A nil f reaches the store as nil, which answers state.ErrShape.
	return jen.Func().Params(m.recv()).Id("Step").Params(jen.Id("in").Id(in), jen.Id("f").Add(fn)).Error().Block(
		jen.Var().Id("step").Add(st("Stepper")),
		jen.If(jen.Id("f").Op("!=").Nil()).Block(
			jen.Id("step").Op("=").Id(stepName(m.typ())).Call(jen.Id("f")),
		),
		jen.Return(m.hcall("StepWith", batch, jen.Lit(m.c.Replay.Verify), jen.Id("step"))),
	)
}

// stepType renders the step function type of Step, whose Step method
// gives f its typed spans and input: a func converts to the store's
// Stepper with no allocation, where a closure over f would take one every
// step.
func (m *model) stepType() *jen.Statement {
	in := m.c.Replay.Input
	_, input := m.stepInput()
	name := stepName(m.typ())
	fn := jen.Func().Params(jen.Id("dst").Id(m.spans()), jen.Id("in").Id(in)).Error()
	return jen.Comment(fmt.Sprintf("%s is the step function of %s.Step, as the store runs it.", name, m.head())).Line().
		Type().Id(name).Add(fn).Line().Line().
		Comment("Step runs f on the rows the spans locate and the input batch cols.").Line().
		Func().Params(jen.Id("f").Id(name)).Id("Step").Params(jen.Id("spans").Index().Index().Qual(devicePkg, "Span"), jen.Id("cols").Index().Index().Byte()).Error().Block(
		jen.List(jen.Id("dst"), jen.Id("_")).Op(":=").Id(m.toSpans()).Call(jen.Id("spans"), jen.Nil()),
		jen.Return(jen.Id("f").Call(jen.Id("dst"), input)),
	)
}

func stepHostDoc(c *contract.Contract) []string {
	return []string{
		fmt.Sprintf("StepHost is Step for a step function written in Go: f gets every row of the state as %s, whose fields it rewrites in place (or replaces with slices of the same lengths), and in. The runtime copies the rows out of device memory before f runs and back after it returns, and copies nothing where the backend's device memory is host memory (the host backend): there rows are the state's own bytes. f must not keep rows or in, and must not call any state: a replay may run while a call holds every state of its group. The history keeps in and f, so At and Rollback rebuild the version by running f again (%s).", article(c.Type), checkpointShort(c.Checkpoint)),
		"When f fails, or leaves a field of another length (state.ErrShape), StepHost returns an error wrapping it and the state is as before. StepHost(in, nil) answers state.ErrShape.",
	}
}

// stepHostCode renders StepHost: the typed input over the store's
// StepHostWith, f handed over as the file's host step type
// (stepHostType).
func (m *model) stepHostCode() *jen.Statement {
	in := m.c.Replay.Input
	batch, _ := m.stepInput()
	fn := jen.Func().Params(jen.Id("rows").Op("*").Id(m.typ()), jen.Id("in").Id(in)).Error()
	// A nil f reaches the store as nil, which answers state.ErrShape.
	return jen.Func().Params(m.recv()).Id("StepHost").Params(jen.Id("in").Id(in), jen.Id("f").Add(fn)).Error().Block(
		jen.Var().Id("step").Add(st("HostStepper")),
		jen.If(jen.Id("f").Op("!=").Nil()).Block(
			jen.Id("step").Op("=").Id(stepHostName(m.typ())).Call(jen.Id("f")),
		),
		jen.Return(m.hcall("StepHostWith", batch, jen.Lit(m.c.Replay.Verify), jen.Id("step"))),
	)
}

// stepHostType renders the step function type of StepHost, whose
// StepHost method gives f the rows as the state's type and the typed
// input, and hands the fields f leaves back as the next rows; and the
// scratch its *T comes from. A func converts to the store's HostStepper
// with no allocation, and the *T is kept for the next step, so that a
// step on the host backend allocates nothing.
func (m *model) stepHostType() *jen.Statement {
	in := m.c.Replay.Input
	_, input := m.stepInput()
	name, scratch := stepHostName(m.typ()), scratchName(m.typ())
	rows := make([]jen.Code, len(m.fields))
	back := make([]jen.Code, len(m.fields))
	for i, f := range m.fields {
		rows[i] = key(f.Name, st("Rows").Types(m.typeCode(f.elem)).Call(jen.Id("rows").Index(jen.Lit(i))))
		back[i] = jen.Id("rows").Index(jen.Lit(i)).Op("=").Add(st("Bytes").Call(jen.Id("r").Dot(f.Name)))
	}
	typed := jen.Id(m.typ()).Values(rows...)
	if len(rows) > 2 {
		typed = jen.Id(m.typ()).Custom(multi, rows...)
	}
	fn := jen.Func().Params(jen.Id("rows").Op("*").Id(m.typ()), jen.Id("in").Id(in)).Error()
	body := []jen.Code{
		jen.Id("r").Op(":=").Id(scratch).Dot("Get").Call(),
		jen.Op("*").Id("r").Op("=").Add(typed),
		jen.Id("err").Op(":=").Id("f").Call(jen.Id("r"), input),
	}
	body = append(body, back...)
	body = append(body, jen.Id(scratch).Dot("Put").Call(jen.Id("r")), jen.Return(jen.Err()))
	return jen.Comment(fmt.Sprintf("%s is the step function of %s.StepHost, as the store runs it.", name, m.head())).Line().
		Type().Id(name).Add(fn).Line().Line().
		Comment(fmt.Sprintf("%s keeps the %s values %s hands its step function.", scratch, m.typ(), name)).Line().
		Var().Id(scratch).Add(st("Scratch")).Types(jen.Id(m.typ())).Line().Line().
		Comment("StepHost runs f on the rows and the input batch cols; the fields f leaves are the next rows.").Line().
		Func().Params(jen.Id("f").Id(name)).Id("StepHost").Params(jen.List(jen.Id("rows"), jen.Id("cols")).Index().Index().Byte()).Error().Block(body...)
}

// inputElem renders the element type of field name of the input type.
func (m *model) inputElem(name string) jen.Code {
	if tn, ok := m.pkg.Scope().Lookup(m.c.Replay.Input).(*types.TypeName); ok {
		if st, ok := tn.Type().Underlying().(*types.Struct); ok {
			for i := range st.NumFields() {
				if v := st.Field(i); v.Name() == name {
					if s, ok := v.Type().Underlying().(*types.Slice); ok {
						return m.typeCode(s.Elem())
					}
				}
			}
		}
	}
	// Not reached for a valid contract: package contract found the field.
	return jen.Byte()
}
