package contract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// shareSrc is a contract with fields of every kind a share key may name;
// GROWTH and SHARE are replaced by the lines under test.
const shareSrc = `package p

type Token uint16

//state:contract
//state:owner session
//state:GROWTH
//state:SHARE
type T struct {
	Keys  []float32 ` + "`state:\"width=4\"`" + `
	Toks  []Token
	Pos   []int64 ` + "`state:\"width=2\"`" + `
	Pairs [][2]int32
	Ids   []int
	Raw   []byte
}
`

func shareSource(growth, share string) string {
	return strings.NewReplacer("//state:GROWTH", "//state:"+growth, "//state:SHARE", "//state:"+share).Replace(shareSrc)
}

func TestShare(t *testing.T) {
	for _, tc := range []struct {
		growth, share string
		key           string // ShareKey of the valid contract
	}{
		{"growth append bound=4096", "share prefix key=Toks", "Toks"},
		{"growth append bound=4096", "share prefix key=Raw", "Raw"},
		{"growth append bound=unbounded reason=\"one per conversation\"", "share prefix key=Toks // token ids", "Toks"},
	} {
		fset, p := parse(t, shareSource(tc.growth, tc.share))
		if d := diags(fset, p); len(d) != 0 {
			t.Errorf("%s: diagnostics on a valid share line:\n%s", tc.share, strings.Join(d, "\n"))
			continue
		}
		if c := p.Contracts[0]; !c.Valid || c.ShareKey != tc.key {
			t.Errorf("%s: Valid %v, ShareKey %q; want valid, %q", tc.share, c.Valid, c.ShareKey, tc.key)
		}
	}
	// Without a share line, nothing is shared.
	_, p := parse(t, shareSource("growth append bound=8", "cleanup on=end"))
	if c := p.Contracts[0]; !c.Valid || c.ShareKey != "" {
		t.Errorf("no share line: Valid %v, ShareKey %q; want valid, \"\"", c.Valid, c.ShareKey)
	}
}

// TestShareErrors checks each fault of a share line: its exact message, and
// that it is reported at the directive, on the text at (the whole line when
// at is empty), once.
func TestShareErrors(t *testing.T) {
	const bound = "growth append bound=4096"
	for _, tc := range []struct {
		growth, share string
		line          string // the line reported: the share line when empty
		at            string // the text reported within that line; the whole line when empty
		want          string
	}{
		{bound, "share suffix key=Toks", "", "suffix",
			`bad value "suffix" for //state:share of T; use prefix`},
		{bound, "share prefx key=Toks", "", "prefx",
			`bad value "prefx" for //state:share of T; did you mean prefix?`},
		{bound, "share key=Toks", "", "",
			`//state:share of T needs a sharing mode: prefix`},
		{bound, "share prefix lru key=Toks", "", "lru",
			`//state:share of T takes one word; remove "lru" (write a value with spaces as key="...")`},
		{bound, "share prefix", "", "",
			`//state:share of T needs key=FIELD, the integer field whose values identify a prefix (e.g. key=Tokens)`},
		{bound, "share prefix key=", "", "key=",
			`empty key= in //state:share of T; name the integer field whose values identify a prefix (e.g. key=Tokens)`},
		{bound, "share prefix key=\"\"", "", "key=\"\"",
			`empty key= in //state:share of T; name the integer field whose values identify a prefix (e.g. key=Tokens)`},
		{bound, "share prefix kye=Toks", "", "kye",
			`unknown key kye in //state:share of T; did you mean key?`},
		{bound, "share prefix key=Tok", "", "Tok",
			`share key "Tok" of T names no field of T; did you mean Toks?`},
		{bound, "share prefix key=toks", "", "toks",
			`share key "toks" of T names no field of T; did you mean Toks?`},
		{bound, "share prefix key=Session", "", "Session",
			`share key "Session" of T names no field of T; use one of Keys, Toks, Pos, Pairs, Ids, Raw`},
		{bound, "share prefix key=Keys", "", "Keys",
			`share key Keys of T has element type float32; a key is a sized integer (int8 to int64, uint8 to uint64, or a type over one), such as a token id: key on such a field`},
		{bound, "share prefix key=Pairs", "", "Pairs",
			`share key Pairs of T has element type [2]int32; a key is a sized integer (int8 to int64, uint8 to uint64, or a type over one), such as a token id: key on such a field`},
		{bound, "share prefix key=Ids", "", "Ids",
			`share key Ids of T has element type int; a key is a sized integer (int8 to int64, uint8 to uint64, or a type over one), such as a token id: key on such a field`},
		{bound, "share prefix key=Pos", "", "Pos",
			`share key Pos of T has width 2; a key is one value per row: key on a field of width 1 (no width tag)`},
		{"growth mutable bound=64", "share prefix key=Toks", "", "",
			`//state:share of T needs append growth: shared blocks are read only, and a mutable state writes its rows in place; remove the share line or use //state:growth append bound=N`},
		{"growth append window=64", "share prefix key=Toks", "", "",
			`//state:share of T cannot share the prefix of a window: rows below the window expire, and a shared prefix must stay readable; remove the share line or use bound=N`},
		{bound, "share prefix key=Toks\n//state:share prefix key=Raw", "//state:share prefix key=Raw", "",
			`repeated //state:share in the contract of T (first at line 8); keep one`},
	} {
		t.Run(tc.share, func(t *testing.T) {
			src := shareSource(tc.growth, tc.share)
			fset, p := parse(t, src)
			line := tc.line
			if line == "" {
				line, _, _ = strings.Cut("//state:"+tc.share, "\n")
			}
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

// TestShareKeyFix checks the fix of a misspelt key field.
func TestShareKeyFix(t *testing.T) {
	src := shareSource("growth append bound=8", "share prefix key=tok")
	fset, p := parse(t, src)
	if len(p.Diagnostics) != 1 || len(p.Diagnostics[0].Fixes) != 1 {
		t.Fatalf("diagnostics %q; want one with a fix", diags(fset, p))
	}
	fix := p.Diagnostics[0].Fixes[0]
	e := fix.Edits[0]
	start, end := fset.Position(e.Pos).Offset, fset.Position(e.End).Offset
	got := src[:start] + e.NewText + src[end:]
	if want := shareSource("growth append bound=8", "share prefix key=Toks"); got != want || fix.Message != "replace tok with Toks" {
		t.Errorf("fix %q gives\n%s\nwant\n%s", fix.Message, got, want)
	}
}

// TestShareRejectedField checks that a key naming a field rejected at the
// field is not reported a second time at the share line.
func TestShareRejectedField(t *testing.T) {
	src := "package p\n//state:contract\n//state:owner s\n//state:growth append bound=8\n//state:share prefix key=Names\ntype T struct {\n\tNames []string\n\tToks []int32\n}\n"
	fset, p := parse(t, src)
	d := diags(fset, p)
	if len(d) != 1 || !strings.HasPrefix(d[0], "7: stcontract: field Names of state type T has type []string") &&
		!strings.HasPrefix(d[0], "7: stcontract: field Names of state type T has element type string") {
		t.Errorf("diagnostics:\n%s\nwant one, at the field Names", strings.Join(d, "\n"))
	}
}

// TestShareUntyped checks the share line of a package parsed without type
// information: the key is checked against the field names alone.
func TestShareUntyped(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"Toks", ""},
		{"Tok", `share key "Tok" of T names no field of T; did you mean Toks?`},
	} {
		src := shareSource("growth append bound=8", "share prefix key="+tc.key)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		p := ParsePackage(fset, []*ast.File{f}, nil, nil)
		var got string
		for _, d := range p.Diagnostics {
			got += d.Message
		}
		if got != tc.want {
			t.Errorf("key=%s: diagnostics %q, want %q", tc.key, got, tc.want)
		}
		if c := p.Contracts[0]; tc.want == "" && c.ShareKey != tc.key {
			t.Errorf("key=%s: ShareKey %q", tc.key, c.ShareKey)
		}
	}
}
