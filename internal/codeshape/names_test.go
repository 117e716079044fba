package codeshape

import (
	"go/ast"
	"go/token"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// generatedSuffix matches what the rule naming generated code adds to a
// state type's name: TState, TSnapshot, TSpans, NewTStateShared, t_state.go.
var generatedSuffix = regexp.MustCompile(`^(State|Snapshot|Spans)(Shared)?$|^_state(\.go)?$`)

// generatedFormat matches a format verb followed by such a suffix: a
// fmt.Sprintf("%sState", T) spelling the rule.
var generatedFormat = regexp.MustCompile(`%[-+# 0-9.]*[sqv](State|Snapshot|Spans|_state)`)

// TestGeneratedNamesSpeltOnce checks that the names stategen gives generated
// types and files are spelt by contract.GeneratedNames alone
// (docs/INTERNALS.md, "contract"): no hand-written Go file elsewhere adds a
// suffix such as "State", "Snapshot", "Spans" or "_state.go" to a name, nor
// formats one in, nor tests a name for one.
func TestGeneratedNamesSpeltOnce(t *testing.T) {
	walkSource(t, func(rel string, fset *token.FileSet, f *ast.File) {
		if strings.HasPrefix(rel, "contract/") {
			return
		}
		for _, at := range spelledNameRule(f) {
			t.Errorf("%s:%d: %s spells the rule naming generated code; call contract.GeneratedNames",
				rel, fset.Position(at.Pos()).Line, at.Value)
		}
	})
}

// spelledNameRule returns the string literals of f that spell the rule
// naming generated code: a suffix added with +, or tested for or cut with
// strings.HasSuffix, TrimSuffix or CutSuffix, or a format that appends one.
func spelledNameRule(f *ast.File) []*ast.BasicLit {
	var out []*ast.BasicLit
	suffix := func(e ast.Expr) {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil && generatedSuffix.MatchString(s) {
				out = append(out, lit)
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if n.Op == token.ADD {
				suffix(n.Y)
			}
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && len(n.Args) == 2 && isIdent(sel.X, "strings") &&
				(sel.Sel.Name == "HasSuffix" || sel.Sel.Name == "TrimSuffix" || sel.Sel.Name == "CutSuffix") {
				suffix(n.Args[1])
			}
		case *ast.BasicLit:
			if s, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && generatedFormat.MatchString(s) {
				out = append(out, n)
			}
		}
		return true
	})
	return out
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// TestSpelledNameRule shows the search finds each way of spelling the
// rule, and passes what only looks like it.
func TestSpelledNameRule(t *testing.T) {
	src := `package p

import ("fmt"; "strings")

var (
	head   = typ + "State"
	ctor   = "New" + typ + "StateShared"
	file   = strings.ToLower(typ) + "_state.go"
	snap   = fmt.Sprintf("%sSnapshot", typ)
	spans  = strings.TrimSuffix(name, "Spans")
	isHead = strings.HasSuffix(name, ` + "`State`" + `)

	method = "Snapshot"
	title  = "State " + typ
	other  = typ + "States"
	prose  = fmt.Sprintf("%s: State", typ)
)
`
	f, err := parseString(src)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, lit := range spelledNameRule(f) {
		got = append(got, lit.Value)
	}
	want := []string{`"State"`, `"StateShared"`, `"_state.go"`, `"%sSnapshot"`, `"Spans"`, "`State`"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("found %q, want %q", got, want)
	}
}
