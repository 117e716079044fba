package contract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// replaySrc is a recurrent state with input types of every kind; GROWTH,
// CHECKPOINT and REPLAY are replaced by the lines under test.
const replaySrc = `package p

const Dim = 8

type Tok uint16

//state:contract
//state:owner session
//state:GROWTH
//state:CHECKPOINT
//state:REPLAY
type T struct {
	H []float32 ` + "`state:\"width=4*Dim\"`" + `
}

type In struct {
	X []float32 ` + "`state:\"width=Dim\"`" + `
	Pos []Tok
}

type Named []int32

type Strs struct{ S []string }

type Empty struct{}

type Alias = In

type Gen[E any] struct{ X []E }

type Wide struct {
	X []int8 ` + "`state:\"width=0\"`" + `
}

type Emb struct{ In }

var NotAType In
`

func replaySource(growth, checkpoint, replay string) string {
	return strings.NewReplacer("//state:GROWTH", "//state:"+growth, "//state:CHECKPOINT", "//state:"+checkpoint,
		"//state:REPLAY", "//state:"+replay).Replace(replaySrc)
}

func TestReplay(t *testing.T) {
	for _, tc := range []struct {
		line   string
		verify bool
	}{
		{"replay input=In", false},
		{"replay input=In verify=hash", true},
		{"replay verify=hash input=In // the step's token and activations", true},
	} {
		fset, p := parse(t, replaySource("growth mutable bound=4", "checkpoint every=16 keep=4", tc.line))
		if d := diags(fset, p); len(d) != 0 {
			t.Errorf("%s: diagnostics on a valid replay line:\n%s", tc.line, strings.Join(d, "\n"))
			continue
		}
		c := p.Contracts[0]
		r := c.Replay
		if !c.Valid || r == nil || r.Input != "In" || r.Verify != tc.verify {
			t.Fatalf("%s: Valid %v, Replay %+v", tc.line, c.Valid, r)
		}
		want := []Field{{Name: "X", Elem: "float32", ElemSize: 4, Width: 8, RowBytes: 32}, {Name: "Pos", Elem: "Tok", ElemSize: 2, Width: 1, RowBytes: 2}}
		if len(r.Fields) != 2 || r.Fields[0] != want[0] || r.Fields[1] != want[1] {
			t.Errorf("%s: input fields %+v, want %+v", tc.line, r.Fields, want)
		}
	}
	_, p := parse(t, replaySource("growth mutable bound=4", "checkpoint every=16 keep=4", "cleanup on=end"))
	if c := p.Contracts[0]; !c.Valid || c.Replay != nil {
		t.Errorf("no replay line: Valid %v, Replay %+v", c.Valid, c.Replay)
	}
}

// TestReplayErrors checks each fault of a replay line: its exact message,
// reported once, at the text at of the replay line (the whole line when at
// is empty).
func TestReplayErrors(t *testing.T) {
	const mut, cp = "growth mutable bound=4", "checkpoint every=16 keep=4"
	for _, tc := range []struct {
		growth, checkpoint, replay string
		at, want                   string
	}{
		{"growth append bound=4", cp, "replay input=In", "",
			"//state:replay of T needs mutable growth: a step rewrites the rows of the state in place; remove the replay line or use //state:growth mutable bound=N"},
		{mut, "cleanup on=end", "replay input=In", "",
			"//state:replay of T needs a //state:checkpoint line: replay seeds from a checkpoint and runs the steps after it; add //state:checkpoint every=N keep=K"},
		{mut, cp, "replay", "",
			"//state:replay of T needs input=T, the struct type of one step's input (rows of fixed-size fields, like a state type's)"},
		{mut, cp, "replay inptu=In", "inptu", "unknown key inptu in //state:replay of T; did you mean input?"},
		{mut, cp, "replay input=In verify=sha", "sha", `bad value "sha" for verify in //state:replay of T; use hash`},
		{mut, cp, "replay input=In always", "always", `unexpected argument "always" in //state:replay of T; write input=T, optionally verify=hash`},
		{mut, cp, `replay input="In"`, `"In"`, `input "In" in //state:replay of T is not a type name; write input=T with T a struct type declared in this package`},
		{mut, cp, "replay input=p.In", "p.In", `input "p.In" in //state:replay of T is not a type name; write input=T with T a struct type declared in this package`},
		{mut, cp, "replay input=Inp", "Inp", "input Inp in //state:replay of T names no type of the package; declare type Inp struct{ Field []Elem } beside T"},
		{mut, cp, "replay input=NotAType", "NotAType", "input NotAType in //state:replay of T is not a type; name a struct type declared in this package"},
		{mut, cp, "replay input=T", "T", "input T in //state:replay of T is the state type itself; declare a separate struct type for one step's input"},
		{mut, cp, "replay input=Alias", "Alias", "input Alias in //state:replay of T is an alias; declare it as a defined struct type (type Alias struct{...})"},
		{mut, cp, "replay input=Gen", "Gen", "input Gen in //state:replay of T has type parameters; declare a concrete struct type"},
		{mut, cp, "replay input=Named", "Named", "input Named in //state:replay of T is not a struct type; declare it as type Named struct{ Field []Elem; ... }"},
		{mut, cp, "replay input=Empty", "Empty", "input Empty in //state:replay of T has no fields; add one slice field per column of the input (e.g. X []float32)"},
		{mut, cp, "replay input=Strs", "Strs", "input Strs in //state:replay of T has field S of element type string, which is not fixed-size; use an integer or float type, a named type over one, or an array of them"},
		{mut, cp, "replay input=Wide", "Wide", `input Wide in //state:replay of T has field X with bad width "0" in its tag, which is 0; write state:"width=W" with W a positive integer constant`},
		{mut, cp, "replay input=Emb", "Emb", "input Emb in //state:replay of T has embedded field In; input fields are named slices of fixed-size elements (e.g. In []float32)"},
	} {
		t.Run(tc.replay, func(t *testing.T) {
			src := replaySource(tc.growth, tc.checkpoint, tc.replay)
			fset, p := parse(t, src)
			line := "//state:" + tc.replay
			d := oneDiag(t, fset, p, src, line, tc.at)
			if d.Message != tc.want || d.Analyzer != StContract || d.Type != "T" {
				t.Errorf("got  %s: %s (type %q)\nwant stcontract: %s (type \"T\")", d.Analyzer, d.Message, d.Type, tc.want)
			}
			if p.Contracts[0].Valid {
				t.Error("the contract is valid")
			}
		})
	}
}

// TestReplayUntyped checks the replay line of a package parsed without
// type information: the line's syntax only.
func TestReplayUntyped(t *testing.T) {
	src := replaySource("growth mutable bound=4", "checkpoint every=2 keep=2", "replay input=Missing verify=hash")
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	p := ParsePackage(fset, []*ast.File{f}, nil, nil)
	if len(p.Diagnostics) != 0 {
		t.Fatalf("diagnostics %v", diags(fset, p))
	}
	if r := p.Contracts[0].Replay; r == nil || r.Input != "Missing" || !r.Verify {
		t.Errorf("Replay %+v", r)
	}
}
