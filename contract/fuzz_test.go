package contract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
	"unicode"
)

// FuzzParsePackage checks that any source text gives diagnostics or
// silence, never a panic, and that every diagnostic is well formed.
func FuzzParsePackage(f *testing.F) {
	f.Add(valid)
	f.Add(head + "//state:growth append bound=unbounded reason=\"a \\\"quoted\\\" reason\"\ntype T struct{ X []int32 }\n")
	f.Add("package p\n//state:\n//state:x=\n//state:growth =\n//state:growth \"q\"\ntype T struct{}\n")
	f.Add("package p\n\n//state:writes s\nfunc F[S ~[]E, E any](s S) {}\n")
	// Widths and bounds as constants, imported ones, and sizes past the limit.
	f.Add("package p\n\nimport \"dims\"\n\nconst D = 4\n\n//state:contract\n//state:owner s\n//state:growth mutable bound=dims.Rows\ntype T struct {\n\tX []int32 `state:\"width=2*D\"`\n\tY []int8 `json:\"y\" state:\"width=dims.W, width=1\"`\n}\n")
	f.Add("package p\n\n//state:contract\n//state:owner s\n//state:growth mutable bound=1<<62\ntype T struct {\n\tX []int64 `state:\"width=1<<70\"`\n\tY []int64 `state:\"width=1 << 20\"`\n\tZ []int64 `state:\"width=-1,\"`\n}\n")
	// Prefix sharing keyed by fields of every kind.
	f.Add("package p\n\ntype Tok uint32\n\n//state:contract\n//state:owner s\n//state:growth append bound=64\n//state:share prefix key=T\ntype S struct {\n\tT []Tok\n\tF []float32\n\tA [][2]int8\n\tW []int16 `state:\"width=2\"`\n\tB []bool\n}\n")
	// Replay inputs of every kind.
	f.Add("package p\n\nconst D = 2\n\ntype In struct {\n\tX []float32 `state:\"width=D\"`\n\tS []string\n}\n\ntype E struct{ In }\n\n//state:contract\n//state:owner s\n//state:growth mutable bound=4\n//state:checkpoint every=2 keep=2\n//state:replay input=In verify=hash\ntype T struct{ H []int32 }\n")
	// Groups, sound and faulty.
	f.Add("package p\n\n//state:contract\n//state:owner s\n//state:growth append bound=8\ntype A struct{ X []int32 }\n\n//state:group purpose=\"g\"\n//state:owner s\ntype G struct {\n\tA A\n\tB, C A\n\t*A\n\tD []A\n\tE G\n}\n\n//state:group\n//state:group x\n//state:owner\ntype H = G\n")
	f.Fuzz(func(t *testing.T, src string) {
		checkSource(t, src)
	})
}

// FuzzContractLines wraps arbitrary lines into a contract, to reach the
// argument tokenizer and the validation of every verb more often than
// random source text would.
func FuzzContractLines(f *testing.F) {
	for _, s := range []string{
		"growth append bound=64\nowner session",
		"growth mutable bound=K*K\nowner step\nsnapshot none\ncheckpoint every=2 keep=1",
		"growth append bound=unbounded reason=`raw`\nowner x\nbranch isolated merge=fastforward\nrollback descendants=keep",
		"contract purpose=\"unterminated\ngrowth append bound=1<<62",
		"growth append bound=\"1 << 70\"\nowner a b c\ncleanup on=\nretention durable",
		"Growth append\n state:owner x\nbrnch isolated\ncheckpoint every=0 keep=-1 budget=1e3",
		"growth mutable bound=4\nowner s\ncheckpoint budget=64<<10 keep=2\ncheckpoint every=2 budget=1 keep=1",
		"growth append bound=8\nowner s\ncheckpoint budget=1.5 every=3\ncheckpoint keep=2",
		"growth append window=K*K\nowner s\nblock rows=16\nretention optional",
		"growth mutable window=4 bound=4 reason=x\nowner s\nblock rows=0 rows=2\nblock rws=3",
		"growth append window=1<<62\nowner s\ncheckpoint every=1 keep=1\nblock \"rows\"",
		"growth append bound=8\nowner s\nshare prefix key=X",
		"growth mutable bound=4\nowner s\nshare suffix key=Y key=X\nshare",
		"growth append window=8\nowner s\nshare prefix kye=x\nshare prefx key=\"X\"",
		"growth mutable bound=4\nowner s\ncheckpoint every=2 keep=2\nreplay input=T verify=hash",
		"growth append bound=4\nowner s\nreplay input=K verify=sha\nreplay inptu=\"x\" always",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lines string) {
		var b strings.Builder
		b.WriteString("package p\n\nconst K = 8\n\n//state:contract\n")
		for _, l := range strings.Split(lines, "\n") {
			b.WriteString("//state:" + strings.ReplaceAll(l, "\r", "") + "\n")
		}
		b.WriteString("type T struct {\n\tX []int32 `state:\"width=2\"`\n}\n")
		checkSource(t, b.String())
	})
}

func checkSource(t *testing.T, src string) {
	fset := token.NewFileSet()
	file, _ := parser.ParseFile(fset, "p.go", src, parser.ParseComments|parser.AllErrors)
	if file == nil {
		return
	}
	files := []*ast.File{file}
	p := check(fset, files)
	// Without type information, too.
	q := ParsePackage(fset, files, nil, nil)
	tf := fset.File(file.Pos())
	for _, pkg := range []*Package{p, q} {
		for _, d := range pkg.Diagnostics {
			if strings.HasPrefix(d.Message, "internal error") {
				t.Errorf("the parser panicked: %s", d.Message)
			}
			if d.Message == "" || strings.HasSuffix(d.Message, ".") {
				t.Errorf("malformed message %q", d.Message)
			}
			if r := []rune(d.Message)[0]; unicode.IsUpper(r) {
				t.Errorf("message starts with a capital: %q", d.Message)
			}
			if d.Analyzer != StContract && d.Analyzer != StGrowth {
				t.Errorf("diagnostic %q has analyzer %q", d.Message, d.Analyzer)
			}
			if !d.Pos.IsValid() || d.End < d.Pos || tf == nil || int(d.End) > tf.Base()+tf.Size() {
				t.Errorf("diagnostic %q has a bad range [%d, %d)", d.Message, d.Pos, d.End)
			}
			for _, fix := range d.Fixes {
				for _, e := range fix.Edits {
					if e.End < e.Pos || int(e.Pos) < tf.Base() || int(e.End) > tf.Base()+tf.Size() {
						t.Errorf("fix %q has a bad edit [%d, %d)", fix.Message, e.Pos, e.End)
					}
				}
			}
		}
		for _, c := range pkg.Contracts {
			if c.Valid && (c.Growth == GrowthUnset || c.Owner == "" || len(c.Fields) == 0 && c.Object() != nil) {
				t.Errorf("valid contract %s is incomplete: %+v", c.Type, c)
			}
		}
	}
}
