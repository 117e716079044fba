package contract

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"reflect"
	"strings"
	"testing"
)

// parse type-checks src as package p and parses its directives. Type errors
// are ignored: ParsePackage must cope with whatever the checker produced.
func parse(t testing.TB, src string) (*token.FileSet, *Package) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return fset, check(fset, []*ast.File{f})
}

func check(fset *token.FileSet, files []*ast.File) *Package {
	conf := types.Config{Importer: noImports{}, Error: func(error) {}}
	info := &types.Info{Defs: make(map[*ast.Ident]types.Object), Types: make(map[ast.Expr]types.TypeAndValue)}
	pkg, _ := conf.Check("p", fset, files, info)
	return ParsePackage(fset, files, pkg, info)
}

// diags renders diagnostics as "line: analyzer: message".
func diags(fset *token.FileSet, p *Package) []string {
	var out []string
	for _, d := range p.Diagnostics {
		out = append(out, fmt.Sprintf("%d: %s: %s", fset.Position(d.Pos).Line, d.Analyzer, d.Message))
	}
	return out
}

// oneDiag checks that p, parsed from src, has one diagnostic, reported on
// the text at (the whole line when at is "") of line, the first such line
// of src, and returns it.
func oneDiag(t *testing.T, fset *token.FileSet, p *Package, src, line, at string) Diagnostic {
	t.Helper()
	if at == "" {
		at = line
	}
	if len(p.Diagnostics) != 1 {
		t.Fatalf("got %d diagnostics, want 1:\n%s", len(p.Diagnostics), strings.Join(diags(fset, p), "\n"))
	}
	d := p.Diagnostics[0]
	off := strings.Index(src, line) + strings.Index(line, at)
	if got := fset.Position(d.Pos).Offset; got != off {
		t.Errorf("reported at %s, want offset %d (%q)", fset.Position(d.Pos), off, at)
	}
	if got := fset.Position(d.End).Offset; got != off+len(at) {
		t.Errorf("report ends at offset %d, want %d", got, off+len(at))
	}
	return d
}

const valid = `package p

const MaxTokens = 2048

type Token uint16

// KVCache is the attention cache of one session.
//
//state:contract purpose="attention keys and values"
//state:growth append bound=4*MaxTokens
//state:owner session
//state:retention reconstructable
//state:snapshot immutable
//state:branch isolated merge=fastforward
//state:rollback descendants=keep
//state:checkpoint budget=1<<20 keep=4
//state:cleanup on=session-end
type KVCache struct {
	Keys   []float32 ` + "`state:\"width=128\"`" + `
	Values []float32 ` + "`state:\"width=128\"`" + `
	Toks   []Token
	Pairs  [][2]uint8
}

//state:snapshot
type KVCacheSnapshot struct{ v int }

// Grid is a simulation field.
//
//state:contract
//state:growth mutable bound=64
//state:owner step
//state:snapshot none
type Grid struct{ Cells []float64 }

//state:acquire
func Open() (*KVCacheSnapshot, error) { return nil, nil }

//state:release
func (s *KVCacheSnapshot) Release() error { return nil }

//state:takes s
//state:writes dst
func Consume(s *KVCacheSnapshot, dst []float32) {}

//state:appends
func (s *KVCacheSnapshot) Append(x KVCache) error { return nil }

//state:view
func (s KVCacheSnapshot) Data() []float32 { return nil }
`

func TestValid(t *testing.T) {
	fset, p := parse(t, valid)
	if d := diags(fset, p); len(d) > 0 {
		t.Fatalf("valid package has diagnostics:\n%s", strings.Join(d, "\n"))
	}
	if len(p.Contracts) != 2 {
		t.Fatalf("got %d contracts, want 2", len(p.Contracts))
	}
	kv := p.Contracts[0]
	if kv.Object() == nil || kv.Object().Name() != "KVCache" {
		t.Errorf("Object() = %v, want KVCache", kv.Object())
	}
	kv.obj = nil
	kv.Pos = 0
	want := &Contract{
		Type:        "KVCache",
		Purpose:     "attention keys and values",
		Growth:      GrowthAppend,
		Bound:       8192,
		Owner:       "session",
		Retention:   RetentionReconstructable,
		Snapshot:    SnapshotImmutable,
		Branch:      BranchIsolated,
		Merge:       MergeFastforward,
		Rollback:    true,
		Descendants: DescendantsKeep,
		Checkpoint:  &Checkpoint{Keep: 4, Budget: 1 << 20},
		Cleanup:     "session-end",
		Fields: []Field{
			{Name: "Keys", Elem: "float32", ElemSize: 4, Width: 128, RowBytes: 512},
			{Name: "Values", Elem: "float32", ElemSize: 4, Width: 128, RowBytes: 512},
			{Name: "Toks", Elem: "Token", ElemSize: 2, Width: 1, RowBytes: 2},
			{Name: "Pairs", Elem: "[2]uint8", ElemSize: 2, Width: 1, RowBytes: 2},
		},
		Valid: true,
	}
	if !reflect.DeepEqual(kv, want) {
		t.Errorf("KVCache contract:\n got %+v\nwant %+v", kv, want)
	}
	g := p.Contracts[1]
	if g.Growth != GrowthMutable || g.Bound != 64 || g.Snapshot != SnapshotNone || g.Owner != "step" || !g.Valid {
		t.Errorf("Grid contract = %+v", g)
	}
	if len(p.Snapshots) != 1 || p.Snapshots[0].Type != "KVCacheSnapshot" {
		t.Errorf("snapshots = %+v", p.Snapshots)
	}
	var funcs []string
	for _, f := range p.Funcs {
		funcs = append(funcs, fmt.Sprintf("%s a=%v r=%v m=%v ap=%v v=%v t=%v w=%v", f.Name, f.Acquire, f.Release, f.Mutates, f.Appends, f.View, f.Takes, f.Writes))
	}
	wantFuncs := []string{
		"Open a=true r=false m=false ap=false v=false t=[] w=[]",
		"(*KVCacheSnapshot).Release a=false r=true m=false ap=false v=false t=[] w=[]",
		"Consume a=false r=false m=false ap=false v=false t=[s] w=[dst]",
		"(*KVCacheSnapshot).Append a=false r=false m=true ap=true v=false t=[] w=[]",
		"KVCacheSnapshot.Data a=false r=false m=false ap=false v=true t=[] w=[]",
	}
	if !reflect.DeepEqual(funcs, wantFuncs) {
		t.Errorf("funcs:\n got %q\nwant %q", funcs, wantFuncs)
	}
}

// head is a valid contract preamble for the type T; tests add lines.
const head = "package p\n\n//state:contract\n//state:owner session\n"

func TestDiagnostics(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want []string // "line: analyzer: substring"
	}{
		{"unknown verb", head + "//state:growth append bound=8\n//state:brnch isolated merge=unsupported\ntype T struct{ X []int32 }\n",
			[]string{"6: stcontract: unknown directive //state:brnch on state type T; did you mean branch?"}},
		{"unknown key", head + "//state:growth append bond=8\ntype T struct{ X []int32 }\n",
			[]string{"5: stcontract: unknown key bond in //state:growth of T; did you mean bound?"}},
		{"bad value", head + "//state:growth append bound=8\n//state:retention optinal\ntype T struct{ X []int32 }\n",
			[]string{`6: stcontract: bad value "optinal" for //state:retention of T; did you mean optional?`}},
		{"missing growth and owner", "package p\n\n//state:contract\ntype T struct{ X []int32 }\n",
			[]string{"3: stcontract: state type T has no //state:growth line", "3: stcontract: state type T has no //state:owner line"}},
		{"reconstructable without checkpoint", head + "//state:growth append bound=8\n//state:retention reconstructable\ntype T struct{ X []int32 }\n",
			[]string{"6: stcontract: reconstructable state T needs a //state:checkpoint line"}},
		{"rollback with snapshot none", head + "//state:growth append bound=8\n//state:snapshot none\n//state:rollback descendants=keep\n//state:checkpoint every=2 keep=2\ntype T struct{ X []int32 }\n",
			[]string{"7: stcontract: //state:rollback of T needs snapshots", "8: stcontract: //state:checkpoint of T needs snapshots"}},
		{"durable", head + "//state:growth append bound=8\n//state:retention durable\ntype T struct{ X []int32 }\n",
			[]string{"6: stcontract: the contract of T claims durability (durable)"}},
		{"crash-safe verb", head + "//state:growth append bound=8\n//state:crash-safe\ntype T struct{ X []int32 }\n",
			[]string{"6: stcontract: the contract of T claims durability (crash-safe)"}},
		{"branch without merge", head + "//state:growth append bound=8\n//state:branch isolated\ntype T struct{ X []int32 }\n",
			[]string{"6: stcontract: isolated branches of T need a merge decision; add merge=unsupported or merge=fastforward"}},
		{"merge with branch none", head + "//state:growth append bound=8\n//state:branch none merge=fastforward\ntype T struct{ X []int32 }\n",
			[]string{"6: stcontract: merge applies only to isolated branches"}},
		{"unsupported field", head + "//state:growth append bound=8\ntype T struct {\n\tX []int32\n\tS []string\n\tM map[int]int\n\tC []complex64\n\tB []bool\n}\n",
			[]string{"8: stcontract: field S of state type T has element type string", "9: stcontract: field M of state type T has type map[int]int",
				"10: stcontract: field C of state type T has element type complex64", "11: stcontract: field B of state type T has element type bool"}},
		{"bound not constant", head + "//state:growth append bound=n\ntype T struct{ X []int32 }\nvar n = 3\n",
			[]string{`5: stcontract: bound "n" of T is not a constant`}},
		{"bound float", head + "//state:growth append bound=2.5\ntype T struct{ X []int32 }\n",
			[]string{`5: stcontract: bound "2.5" of T is not an integer constant`}},
		{"bound undefined", head + "//state:growth append bound=Max\ntype T struct{ X []int32 }\n",
			[]string{`5: stcontract: bound "Max" of T is not a valid constant expression (undefined: Max)`}},
		{"bound negative", head + "//state:growth append bound=-4\ntype T struct{ X []int32 }\n",
			[]string{`5: stcontract: bound "-4" of T is -4; a bound must be a positive number of rows`}},
		{"append no bound", head + "//state:growth append\ntype T struct{ X []int32 }\n",
			[]string{"5: stgrowth: append growth of T has no bound"}},
		{"unbounded no reason", head + "//state:growth append bound=unbounded\ntype T struct{ X []int32 }\n",
			[]string{"5: stgrowth: bound=unbounded on T has no reason"}},
		{"unbounded with reason", head + "//state:growth append bound=unbounded reason=\"a log, trimmed by the owner\"\ntype T struct{ X []int32 }\n",
			nil},
		{"checkpoint no keep", head + "//state:growth append bound=8\n//state:checkpoint every=4\ntype T struct{ X []int32 }\n",
			[]string{"6: stgrowth: checkpoint history of T has no keep"}},
		{"no cascade", head + "//state:growth append\n//state:branch isolated\ntype T struct{ X []int32 }\n",
			[]string{"6: stcontract: isolated branches of T need a merge decision"}},
		{"spaced", head + "// state:growth append bound=8\ntype T struct{ X []int32 }\n",
			[]string{"5: stcontract: // state:growth has a space after //"}},
		{"uppercase verb", head + "//state:Growth append bound=8\ntype T struct{ X []int32 }\n",
			[]string{"5: stcontract: //state:Growth is not a directive (verbs are lowercase words); write //state:growth"}},
		{"repeated", head + "//state:growth append bound=8\n//state:owner request\ntype T struct{ X []int32 }\n",
			[]string{"6: stcontract: repeated //state:owner in the contract of T (first at line 4); keep one"}},
		{"mutable without bound", head + "//state:growth mutable\ntype T struct{ X []int32 }\n",
			[]string{"5: stcontract: mutable growth of T needs bound=N"}},
		{"mutable unbounded", head + "//state:growth mutable bound=unbounded reason=\"x\"\ntype T struct{ X []int32 }\n",
			[]string{"5: stcontract: mutable growth of T cannot be unbounded"}},
		{"non-struct", head + "//state:growth append bound=8\ntype T []int32\n",
			[]string{"3: stcontract: state type T is not a struct type"}},
		{"empty struct", head + "//state:growth append bound=8\ntype T struct{}\n",
			[]string{"3: stcontract: state type T has no fields"}},
		{"embedded", head + "//state:growth append bound=8\ntype T struct {\n\tE\n\tX []int32\n}\ntype E struct{ Y []int8 }\n",
			[]string{"7: stcontract: embedded field E in state type T"}},
		{"generic", head + "//state:growth append bound=8\ntype T[E ~float32] struct{ X []E }\n",
			[]string{"3: stcontract: state type T has type parameters"}},
		{"alias", head + "//state:growth append bound=8\ntype T = U\ntype U struct{ X []int8 }\n",
			[]string{"3: stcontract: state type T is an alias"}},
		{"bad width", head + "//state:growth append bound=8\ntype T struct {\n\tX []int32 `state:\"width=0\"`\n\tY []int32 `state:\"wdth=2\"`\n}\n",
			[]string{`7: stcontract: field X of state type T: bad width "0"`, "8: stcontract: field Y of state type T: unknown key wdth in tag state:\"wdth=2\"; did you mean width?"}},
		{"quoted value unterminated", "package p\n\n//state:contract purpose=\"x\n//state:owner session\n//state:growth append bound=8\ntype T struct{ X []int32 }\n",
			[]string{"3: stcontract: malformed argument in //state:contract of T: unterminated or malformed quoted value for purpose"}},
		{"func directive on type", head + "//state:growth append bound=8\n//state:acquire\ntype T struct{ X []int32 }\n",
			[]string{"6: stcontract: //state:acquire applies to a func or method, not to state type T"}},
		{"type directive on func", "package p\n\n//state:growth append bound=8\nfunc F() {}\n",
			[]string{"3: stcontract: //state:growth applies to the doc comment of a state type, not to func F"}},
		{"directive outside contract", "package p\n\n//state:owner session\ntype T struct{ X []int32 }\n",
			[]string{"3: stcontract: //state:owner on T is outside a contract; add //state:contract"}},
		{"misplaced", "package p\n\nfunc F() {\n\t//state:acquire\n\tx := 1\n\t_ = x\n}\n\n//state:snapshot\n\nvar V int\n",
			[]string{"4: stcontract: //state:acquire is not in the doc comment of a type or func", "9: stcontract: //state:snapshot is not in the doc comment"}},
		{"release on func", "package p\n\n//state:release\nfunc Close(x *int) {}\n",
			[]string{"3: stcontract: //state:release applies to a method (it releases its receiver), and func Close is a plain func"}},
		{"takes no parameter", "package p\n\n//state:takes buff\nfunc Put(buf []byte) {}\n",
			[]string{"3: stcontract: //state:takes buff on func Put names no parameter; did you mean buf?"}},
		{"writes non-slice", "package p\n\n//state:writes n\nfunc Fill(n int, p *int, s []int) {}\n\n//state:writes p s\nfunc Fill2(n int, p *int, s []int) {}\n",
			[]string{"3: stcontract: //state:writes n on func Fill: parameter n has type int, which is neither a slice nor a pointer"}},
		{"writes generic", "package p\n\n//state:writes s\nfunc Fill[S ~[]E, E any](s S) {}\n\n//state:writes v\nfunc Bad[V any](v V) {}\n",
			[]string{"6: stcontract: //state:writes v on func Bad: parameter v has type V"}},
		{"acquire no result", "package p\n\n//state:acquire\nfunc New() {}\n",
			[]string{"3: stcontract: //state:acquire on func New: it returns nothing"}},
		{"unknown func verb", "package p\n\n//state:aquire\nfunc New() *int { return nil }\n",
			[]string{"3: stcontract: unknown directive //state:aquire on func New; did you mean acquire?"}},
		{"remark", head + "//state:growth append bound=8 // rows per session\ntype T struct{ X []int32 }\n", nil},
		{"two contracts", head + "//state:growth append bound=8\ntype A struct{ X []int32 }\n\n" +
			"//state:contract\n//state:owner step\n//state:growth append bound=0\ntype B struct{ X []int32 }\n",
			[]string{`10: stcontract: bound "0" of B is 0`}},
		{"checkpoint values", head + "//state:growth append bound=8\n//state:checkpoint every=0 keep=K\ntype T struct{ X []int32 }\n",
			[]string{`6: stcontract: every="0" in //state:checkpoint of T is 0`, `6: stcontract: keep="K" in //state:checkpoint of T is not a valid constant expression (undefined: K)`}},
		{"checkpoint budget values", head + "//state:growth append bound=8\n//state:checkpoint budget=-1 keep=1\n//state:retention reconstructable\ntype T struct{ X []int32 }\n\n" +
			"//state:contract\n//state:owner s\n//state:growth append bound=8\n//state:checkpoint keep=1 budget=1.5\ntype U struct{ X []int32 }\n\n" +
			"//state:contract\n//state:owner s\n//state:growth append bound=8\n//state:checkpoint keep=1 budget=0\ntype V struct{ X []int32 }\n",
			[]string{`6: stcontract: budget="-1" in //state:checkpoint of T is -1`,
				`13: stcontract: budget="1.5" in //state:checkpoint of U is not an integer constant`,
				`19: stcontract: budget="0" in //state:checkpoint of V is 0`}},
		{"checkpoint budget only", head + "//state:growth mutable bound=8\n//state:checkpoint budget=64<<10 keep=2\ntype T struct{ X []int32 }\n", nil},
		{"checkpoint every and budget", head + "//state:growth append bound=8\n//state:checkpoint every=4 keep=2 budget=1<<20\ntype T struct{ X []int32 }\n\n" +
			"//state:contract\n//state:owner s\n//state:growth append bound=8\n//state:checkpoint budget=1<<20 every=4 keep=2\ntype U struct{ X []int32 }\n",
			[]string{"6: stcontract: //state:checkpoint of T has both every and budget; choose one: every=N for a fixed spacing of N versions, budget=BYTES for a spacing in bytes replayed (a checkpoint whenever the deltas written since the last one reach BYTES)",
				"12: stcontract: //state:checkpoint of U has both every and budget; choose one"}},
		{"checkpoint neither", head + "//state:growth append bound=8\n//state:checkpoint keep=2\ntype T struct{ X []int32 }\n",
			[]string{"6: stcontract: //state:checkpoint of T needs every=N or budget=BYTES"}},
		{"checkpoint misspelt budget", head + "//state:growth append bound=8\n//state:checkpoint bugdet=64 keep=2\ntype T struct{ X []int32 }\n",
			[]string{"6: stcontract: unknown key bugdet in //state:checkpoint of T; did you mean budget?"}},
		{"cleanup event", head + "//state:growth append bound=8\n//state:cleanup on=\"end of session\"\ntype T struct{ X []int32 }\n",
			[]string{`6: stcontract: cleanup event "end of session" of T is not a word`}},
		{"owner key", head[:len(head)-len("//state:owner session\n")] + "//state:owner kind=session\n//state:growth append bound=8\ntype T struct{ X []int32 }\n",
			[]string{"4: stcontract: //state:owner of T needs an owner kind", `4: stcontract: //state:owner of T takes no key=value arguments; remove "kind=session"`}},
		{"contract word", "package p\n\n//state:contract kv\n//state:owner s\n//state:growth append bound=8\ntype T struct{ X []int32 }\n",
			[]string{`3: stcontract: unexpected argument "kv" in //state:contract of T; write purpose="..."`}},
		{"group doc", "package p\n\n//state:contract\ntype (\n\tT struct{ X []int32 }\n)\n",
			[]string{"3: stcontract: //state:contract is not in the doc comment of a type or func"}},
		{"quoted bound", head + "//state:growth append bound=\"2 * 8\"\ntype T struct{ X []int32 }\n", nil},
		{"misspelt key is not also missing", head + "//state:growth append bound=8\n//state:branch isolated mrege=unsupported\ntype T struct{ X []int32 }\n",
			[]string{"6: stcontract: unknown key mrege in //state:branch of T; did you mean merge?"}},
		{"prose is not a directive", head + "//state:growth append bound=8\n// state: the rows\ntype T struct{ X []int32 }\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fset, p := parse(t, tc.src)
			got := diags(fset, p)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d diagnostics, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("diagnostic %d:\n got %s\nwant prefix %s", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// noImports fails every import at once: the tests need no imports, and the
// fuzz targets must not start a go command per input.
type noImports struct{}

func (noImports) Import(path string) (*types.Package, error) {
	return nil, fmt.Errorf("no imports in tests: %s", path)
}

// TestLargeInput checks that a large file, with many contracts, fields and
// misplaced or look-alike lines, parses in linear time without trouble.
func TestLargeInput(t *testing.T) {
	var b strings.Builder
	b.WriteString("package p\n\nconst K = 8\n\n")
	for i := range 500 {
		fmt.Fprintf(&b, "// T%d is a state type.\n//\n//state:contract purpose=%q\n//state:growth append bound=K*%d\n//state:owner session\n", i, strings.Repeat("x", 200), i+1)
		fmt.Fprintf(&b, "type T%d struct {\n", i)
		for j := range 40 {
			fmt.Fprintf(&b, "\tF%d []float32 `state:\"width=%d\"`\n", j, j+1)
		}
		b.WriteString("}\n\nfunc f" + fmt.Sprint(i) + "() {\n\t// state:growth append\n\t//state:owner x\n}\n\n")
	}
	fset, p := parse(t, b.String())
	if len(p.Contracts) != 500 {
		t.Fatalf("got %d contracts, want 500", len(p.Contracts))
	}
	for _, c := range p.Contracts {
		if !c.Valid || len(c.Fields) != 40 {
			t.Fatalf("contract %s: valid=%t fields=%d", c.Type, c.Valid, len(c.Fields))
		}
	}
	if got := len(diags(fset, p)); got != 1000 {
		t.Errorf("got %d diagnostics, want 1000 (a look-alike and a misplaced line per func)", got)
	}
}

// TestCheckpointSpacing checks that a checkpoint line with both every and
// budget is reported at the second of the two, and that the policy it
// parses keeps the spacing it names.
func TestCheckpointSpacing(t *testing.T) {
	for _, tc := range []struct {
		line   string
		at     string // the argument reported; "" for none
		policy Checkpoint
	}{
		{"every=4 keep=2 budget=1<<20", "budget=1<<20", Checkpoint{Every: 4, Keep: 2}},
		{"budget=1<<20 keep=2 every=4", "every=4", Checkpoint{Keep: 2, Budget: 1 << 20}},
		{"budget=64<<10 keep=3", "", Checkpoint{Keep: 3, Budget: 64 << 10}},
		{"keep=3 every=8", "", Checkpoint{Every: 8, Keep: 3}},
	} {
		t.Run(tc.line, func(t *testing.T) {
			line := "//state:checkpoint " + tc.line
			src := head + "//state:growth mutable bound=8\n" + line + "\ntype T struct{ X []int32 }\n"
			fset, p := parse(t, src)
			if len(p.Contracts) != 1 || p.Contracts[0].Checkpoint == nil {
				t.Fatalf("contracts = %+v", p.Contracts)
			}
			if got := *p.Contracts[0].Checkpoint; got != tc.policy {
				t.Errorf("policy = %+v, want %+v", got, tc.policy)
			}
			if tc.at == "" {
				if d := diags(fset, p); len(d) > 0 {
					t.Errorf("diagnostics for a valid line:\n%s", strings.Join(d, "\n"))
				}
				return
			}
			oneDiag(t, fset, p, src, line, tc.at)
			if p.Contracts[0].Valid {
				t.Error("a contract with both every and budget is valid")
			}
		})
	}
}
