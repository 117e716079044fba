package contract

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"strings"
	"testing"
)

// dimsSrc is an imported package whose constants contracts may name.
const dimsSrc = `package dims

const (
	Head     = 64
	Rows     = 1 << 12
	Big      = 1<<63 - 1
	Fraction = 0.5
)

var Var = 3
`

// pkgImporter serves packages type-checked from source.
type pkgImporter map[string]*types.Package

func (m pkgImporter) Import(path string) (*types.Package, error) {
	if p, ok := m[path]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("no package %s", path)
}

// parseWithDims type-checks src as package p, which may import "dims", and
// parses its directives.
func parseWithDims(t *testing.T, src string) (*token.FileSet, *Package) {
	t.Helper()
	fset := token.NewFileSet()
	df, err := parser.ParseFile(fset, "dims.go", dimsSrc, 0)
	if err != nil {
		t.Fatal(err)
	}
	dims, err := new(types.Config).Check("dims", fset, []*ast.File{df}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	conf := types.Config{Importer: pkgImporter{"dims": dims}, Error: func(error) {}}
	info := &types.Info{Defs: make(map[*ast.Ident]types.Object), Types: make(map[ast.Expr]types.TypeAndValue)}
	pkg, _ := conf.Check("p", fset, []*ast.File{f}, info)
	return fset, ParsePackage(fset, []*ast.File{f}, pkg, info)
}

// constHead opens a file that imports dims and declares Dim; the contract
// of T follows on line 7.
const constHead = "package p\n\nimport \"dims\"\n\nconst Dim, Zero, n = 8, 0, 3\n\nvar _ = dims.Var\n\n//state:contract\n//state:owner session\n"

// TestConstants checks that bound and width are evaluated alike: constant
// expressions over the package's constants and, through the file's imports,
// over those of other packages; and that each bad value is reported at the
// value or the tag with what is wrong.
func TestConstants(t *testing.T) {
	tag := func(w string) string { return "`state:\"width=" + w + "\"`" }
	for _, tc := range []struct {
		name, growth, field string
		bound               int64
		width               int
		want                string // a prefix of the one diagnostic; "" for none
	}{
		{"width const", "append bound=8", "X []int32 " + tag("Dim"), 8, 8, ""},
		{"width expr", "append bound=8", "X []int32 " + tag("2*Dim"), 8, 16, ""},
		{"width spaced expr", "append bound=8", "X []int32 " + tag("2 * Dim + 1"), 8, 17, ""},
		{"width imported", "append bound=8", "X []int32 " + tag("dims.Head"), 8, 64, ""},
		{"width imported expr", "append bound=8", "X []int32 " + tag("dims.Head/Dim"), 8, 8, ""},
		{"width with other keys", "append bound=8", "X []int32 `json:\"x\" state:\"width=Dim\"`", 8, 8, ""},
		{"bound imported", "mutable bound=dims.Rows", "X []int32", 4096, 1, ""},
		{"bound imported expr", "append bound=\"2 * dims.Rows\"", "X []int32", 8192, 1, ""},
		{"width var", "append bound=8", "X []int32 " + tag("n+dims.Var"), 0, 0,
			`field X of state type T: bad width "n+dims.Var" in tag, which is not a constant; write state:"width=W"`},
		{"width float", "append bound=8", "X []int32 " + tag("dims.Fraction"), 0, 0,
			`field X of state type T: bad width "dims.Fraction" in tag, which is not an integer constant`},
		{"width zero", "append bound=8", "X []int32 " + tag("Zero"), 0, 0,
			`field X of state type T: bad width "Zero" in tag, which is 0; write state:"width=W" with W a positive integer constant`},
		{"width negative", "append bound=8", "X []int32 " + tag("Zero-Dim"), 0, 0,
			`field X of state type T: bad width "Zero-Dim" in tag, which is -8`},
		{"width undefined", "append bound=8", "X []int32 " + tag("dims.Width"), 0, 0,
			`field X of state type T: bad width "dims.Width" in tag, which is not a valid constant expression (undefined: dims.Width)`},
		{"width overflow", "append bound=8", "X []int32 " + tag("1<<70"), 0, 0,
			`field X of state type T: bad width "1<<70" in tag, which overflows int64`},
		{"width too wide", "append bound=8", "X []int64 " + tag("1<<38"), 0, 0,
			"field X of state type T has rows of more than 1099511627776 bytes (width 274877906944 of 8-byte elements); use a smaller width"},
		{"width empty", "append bound=8", "X []int32 " + tag(""), 0, 0, `field X of state type T: bad width ""`},
		{"bound imported var", "append bound=dims.Var", "X []int32", 0, 0, `bound "dims.Var" of T is not a constant`},
		{"bound imported float", "append bound=dims.Fraction", "X []int32", 0, 0, `bound "dims.Fraction" of T is not an integer constant`},
		{"bound imported undefined", "append bound=dims.Nope", "X []int32", 0, 0,
			`bound "dims.Nope" of T is not a valid constant expression (undefined: dims.Nope)`},
		{"bound zero", "mutable bound=Zero", "X []int32", 0, 0, `bound "Zero" of T is 0; a bound must be a positive number of rows`},
		{"bound not imported", "append bound=other.Rows", "X []int32", 0, 0, `bound "other.Rows" of T is not a valid constant expression (undefined: other)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := constHead + "//state:growth " + tc.growth + "\ntype T struct {\n\t" + tc.field + "\n}\n"
			fset, p := parseWithDims(t, src)
			got := diags(fset, p)
			if tc.want == "" {
				if len(got) > 0 {
					t.Fatalf("diagnostics for a valid contract:\n%s", strings.Join(got, "\n"))
				}
				c := p.Contracts[0]
				if !c.Valid || c.Bound != tc.bound || len(c.Fields) != 1 || c.Fields[0].Width != tc.width {
					t.Fatalf("contract = %+v, want bound %d and width %d", c, tc.bound, tc.width)
				}
				if c.Fields[0].RowBytes != int64(4*tc.width) {
					t.Errorf("row of %d bytes, want %d", c.Fields[0].RowBytes, 4*tc.width)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], ": stcontract: "+tc.want) {
				t.Fatalf("diagnostics:\n%s\nwant one starting %s", strings.Join(got, "\n"), tc.want)
			}
			if p.Contracts[0].Valid {
				t.Error("the contract is valid")
			}
			// A width is reported at the tag, a bound at its value.
			d := p.Diagnostics[0]
			at := "`state:"
			if strings.HasPrefix(tc.want, "bound") {
				at = tc.growth[strings.Index(tc.growth, "=")+1:]
			}
			if got, want := fset.Position(d.Pos).Offset, strings.LastIndex(src, at); got != want {
				t.Errorf("reported at offset %d, want %d (%s)", got, want, at)
			}
		})
	}
}

// TestConstantsWithoutTypes checks that without type information bounds
// are evaluated in the universe scope: literals work, names do not.
func TestConstantsWithoutTypes(t *testing.T) {
	src := head + "//state:growth append bound=\"1 << 10\"\ntype T struct{ X []int32 }\n\n" +
		"//state:contract\n//state:owner s\n//state:growth append bound=dims.Rows\ntype U struct{ X []int32 }\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	p := ParsePackage(fset, []*ast.File{f}, nil, nil)
	if p.Contracts[0].Bound != 1<<10 {
		t.Errorf("bound of T = %d, want 1024", p.Contracts[0].Bound)
	}
	got := diags(fset, p)
	if len(got) != 1 || !strings.HasPrefix(got[0], `10: stcontract: bound "dims.Rows" of U is not a valid constant expression`) {
		t.Errorf("diagnostics:\n%s", strings.Join(got, "\n"))
	}
}

// TestSizeLimit checks that a bound whose rows no device can hold is
// reported at the bound: bound times the row bytes past 1<<48, or past
// int64. A state of exactly 1<<48 bytes is accepted.
func TestSizeLimit(t *testing.T) {
	for _, tc := range []struct {
		name, growth, fields string
		want                 string // a prefix; "" for none
	}{
		{"at the limit", "mutable bound=1<<45", "X []int64", ""},
		{"at the limit, two fields", "append bound=1<<44", "X []int64\n\tY []int32 `state:\"width=2\"`", ""},
		{"unbounded", "append bound=unbounded reason=\"a log\"", "X []int64 `state:\"width=1<<20\"`", ""},
		{"one row past", "mutable bound=1<<45+1", "X []int64",
			"state type T needs 256 TiB (35184372088833 rows of 8 bytes), more than the 256 TiB (1<<48 bytes) a 48-bit address space maps, so no device or host can hold it: lower the bound or the field widths"},
		{"append past", "append bound=1<<46", "X [][4]int64",
			"state type T may grow to 2 PiB (70368744177664 rows of 32 bytes), more than the 256 TiB"},
		{"widths past", "mutable bound=dims.Rows", "X []float32 `state:\"width=1<<36\"`\n\tY []float32 `state:\"width=1<<36\"`",
			"state type T needs 2 PiB (4096 rows of 549755813888 bytes)"},
		{"overflow", "mutable bound=dims.Big", "X []int64",
			"state type T needs 9223372036854775807 rows of 8 bytes, a size that overflows int64; no device can hold it: lower the bound or the field widths"},
		{"overflow of wide rows", "append bound=1<<40", "X []int64 `state:\"width=1<<30\"`",
			"state type T may grow to 1099511627776 rows of 8589934592 bytes, a size that overflows int64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := constHead + "//state:growth " + tc.growth + "\ntype T struct {\n\t" + tc.fields + "\n}\n"
			fset, p := parseWithDims(t, src)
			got := diags(fset, p)
			if tc.want == "" {
				if len(got) > 0 || !p.Contracts[0].Valid {
					t.Fatalf("diagnostics for a valid contract:\n%s", strings.Join(got, "\n"))
				}
				return
			}
			if len(got) != 1 || !strings.HasPrefix(got[0], "11: stcontract: "+tc.want) {
				t.Fatalf("diagnostics:\n%s\nwant one starting 11: stcontract: %s", strings.Join(got, "\n"), tc.want)
			}
			if p.Contracts[0].Valid {
				t.Error("the contract is valid")
			}
			d := p.Diagnostics[0]
			value := tc.growth[strings.Index(tc.growth, "bound=")+len("bound="):]
			if got, want := fset.Position(d.Pos).Offset, strings.LastIndex(src, value); got != want {
				t.Errorf("reported at offset %d, want %d (the bound)", got, want)
			}
		})
	}
}

func TestByteSize(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 bytes", 1023: "1023 bytes", 1024: "1 KiB", 1536: "1.5 KiB",
		1 << 40: "1 TiB", 1 << 48: "256 TiB", 1<<63 - 1: "8 EiB",
	} {
		if got := byteSize(n); got != want {
			t.Errorf("byteSize(%d) = %q, want %q", n, got, want)
		}
	}
}
