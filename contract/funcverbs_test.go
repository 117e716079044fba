package contract

import (
	"reflect"
	"strconv"
	"testing"
)

// verbsSrc declares the shapes real GPU bindings have: a function that
// frees its argument, a call that acquires two resources, a handle that is
// not a pointer, an error mapper, a callee that takes a buffer only on
// success, a returned releaser and a child of a pool.
const verbsSrc = `package p

type Device struct{}
type Image struct{}
type Memory struct{}
type CmdPool struct{}
type Cmd struct{}
type Texture uint32

// Valid reports whether t names a texture.
//
//state:valid
func (t Texture) Valid() bool { return t != 0 }

//state:frees img
func DestroyImage(dev *Device, img *Image) {}

//state:acquire 0 1
func CreateImage(dev *Device) (*Image, *Memory, error) { return nil, nil, nil }

//state:acquire release=1
func NewWindow() (*Image, func(), error) { return nil, nil, nil }

//state:takes img onsuccess
func Submit(img *Image) error { return nil }

//state:child recv
func (p *CmdPool) Alloc() *Cmd { return nil }

//state:child pool
func AllocIn(pool *CmdPool) *Cmd { return nil }

//state:errmap
func mapErr(err error) error { return err }

func plain(dev *Device, img *Image)          {}
func two() (*Image, error)                   { return nil, nil }
func noErr(img *Image) int                   { return 0 }
func flag() (bool, error)                    { return false, nil }

//state:extern frees img p.plain
//state:extern acquire 0 1 p.CreateImage
//state:extern acquire release=1 p.NewWindow
//state:extern takes img onsuccess p.Submit
//state:extern child recv p.(*CmdPool).Alloc
//state:extern child pool p.AllocIn
//state:extern valid p.Texture.Valid
//state:extern errmap p.mapErr
//state:extern frees img other.com/vk.DestroyImage
//state:extern acquire 0 1 other.com/vk.CreateImage
`

// TestFuncVerbs checks the records of the verbs that carry more than a
// marker, in doc comments and on extern lines.
func TestFuncVerbs(t *testing.T) {
	fset, p := parseExtern(t, verbsSrc)
	checkDiags(t, diags(fset, p), nil)
	byName := make(map[string]*Func)
	for _, f := range p.Funcs {
		byName[f.Name] = f
	}
	check := func(name string, got *Func, want Func) {
		t.Helper()
		if got == nil {
			t.Errorf("%s: no record", name)
			return
		}
		g := *got
		g.Name, g.Pos, g.obj = "", 0, nil
		if !reflect.DeepEqual(g, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, g, want)
		}
	}
	check("DestroyImage", byName["DestroyImage"], Func{Frees: []string{"img"}})
	check("CreateImage", byName["CreateImage"], Func{Acquire: true, Results: []int{0, 1}})
	check("NewWindow", byName["NewWindow"], Func{Acquire: true, Releaser: 2})
	check("Submit", byName["Submit"], Func{TakesOnSuccess: []string{"img"}})
	check("Alloc", byName["(*CmdPool).Alloc"], Func{Child: "recv"})
	check("AllocIn", byName["AllocIn"], Func{Child: "pool"})
	check("Valid", byName["Texture.Valid"], Func{Valid: true})
	check("mapErr", byName["mapErr"], Func{ErrMap: true})
	if got := byName["NewWindow"].AcquiredResults(); !reflect.DeepEqual(got, []int{0}) {
		t.Errorf("NewWindow acquires %v, want [0]", got)
	}
	externs := make(map[string]*Func)
	for _, e := range p.Externs {
		externs[e.Name] = &e.Func
	}
	check("extern plain", externs["p.plain"], Func{Frees: []string{"img"}})
	check("extern CreateImage", externs["p.CreateImage"], Func{Acquire: true, Results: []int{0, 1}})
	check("extern NewWindow", externs["p.NewWindow"], Func{Acquire: true, Releaser: 2})
	check("extern Submit", externs["p.Submit"], Func{TakesOnSuccess: []string{"img"}})
	check("extern Alloc", externs["p.CmdPool.Alloc"], Func{Child: "recv"})
	check("extern AllocIn", externs["p.AllocIn"], Func{Child: "pool"})
	check("extern Valid", externs["p.Texture.Valid"], Func{Valid: true})
	check("extern mapErr", externs["p.mapErr"], Func{ErrMap: true})
	check("extern unresolved frees", externs["other.com/vk.DestroyImage"], Func{Frees: []string{"img"}})
	check("extern unresolved acquire", externs["other.com/vk.CreateImage"], Func{Acquire: true, Results: []int{0, 1}})
}

// TestFuncVerbErrors checks the stcontract findings of the new verbs where
// they cannot apply, in a doc comment and on an extern line.
func TestFuncVerbErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      string // "line:col: message prefix"
	}{
		{"frees no param", "//state:frees im\nfunc f(img *Image) {}", "7:15: //state:frees im on func f names no parameter; did you mean img?"},
		{"onsuccess without error", "//state:takes img onsuccess\nfunc f(img *Image) {}", "7:19: //state:takes ... onsuccess on func f: it has no error result"},
		{"onsuccess on frees", "//state:frees img onsuccess\nfunc f(img *Image) error { return nil }", "7:19: onsuccess applies to //state:takes, not to //state:frees"},
		{"acquire out of range", "//state:acquire 0 2\nfunc f() (*Image, error) { return nil, nil }", "7:19: //state:acquire on func f: result 2 does not exist; it has 2 results"},
		{"acquire error", "//state:acquire 1\nfunc f() (*Image, error) { return nil, nil }", "7:17: //state:acquire 1 on func f: result 1 is its error, not a resource"},
		{"acquire not index", "//state:acquire first\nfunc f() (*Image, error) { return nil, nil }", `7:17: //state:acquire on func f takes result indices (0, 1, ...), and "first" is not one`},
		{"acquire repeated index", "//state:acquire 0 0\nfunc f() (*Image, error) { return nil, nil }", "7:19: repeated result 0 in //state:acquire on func f"},
		{"release not func", "//state:acquire release=0\nfunc f() (*Image, error) { return nil, nil }", "7:17: //state:acquire release=0 on func f: result 0 has type *Image, not a func()"},
		{"release acquired", "//state:acquire 0 1 release=1\nfunc f() (*Image, func(), error) { return nil, nil, nil }", "7:1: //state:acquire on func f: result 1 cannot be both a resource and its releaser"},
		{"acquire bad key", "//state:acquire free=1\nfunc f() (*Image, func(), error) { return nil, nil, nil }", `7:17: unknown key "free" in //state:acquire on func f`},
		{"child no param", "//state:child pol\nfunc f(pool *Image) *Image { return nil }", "7:15: //state:child pol on func f names no parameter; did you mean pool?"},
		{"child recv on func", "//state:child recv\nfunc f(pool *Image) *Image { return nil }", "7:15: //state:child recv on func f: a plain func has no receiver"},
		{"child of nothing", "//state:child pool\nfunc f(pool *Image) {}", "7:1: //state:child on func f: it returns nothing"},
		{"child two names", "//state:child a b\nfunc f(a, b *Image) *Image { return nil }", "7:1: //state:child on func f needs one parameter name"},
		{"child and acquire", "//state:acquire\n//state:child pool\nfunc f(pool *Image) *Image { return nil }", "8:1: //state:child and //state:acquire on func f contradict each other"},
		{"valid on func", "//state:valid\nfunc f() bool { return true }", "7:1: //state:valid applies to a method"},
		{"valid not bool", "//state:valid\nfunc (t Texture) V() int { return 0 }", "7:1: //state:valid on method Texture.V: it must return a single bool"},
		{"errmap no error", "//state:errmap\nfunc f(n int) error { return nil }", "7:1: //state:errmap on func f: it must take an error and return an error"},
		{"extern frees no param", "//state:extern frees im p.g\n\nfunc g(img *Image) {}", "7:22: //state:extern frees im names no parameter of p.g; did you mean img?"},
		{"extern onsuccess without error", "//state:extern takes img onsuccess p.g\n\nfunc g(img *Image) {}", "7:26: //state:extern takes ... onsuccess on p.g: it has no error result"},
		{"extern acquire range", "//state:extern acquire 0 3 p.g\n\nfunc g() (*Image, error) { return nil, nil }", "7:26: //state:acquire on p.g: result 3 does not exist"},
		{"extern release key elsewhere", "//state:extern takes release=1 p.g\n\nfunc g(img *Image) {}", `7:22: //state:extern takes a directive, parameter names and a full name, not key=value; remove "release=1"`},
		{"extern child recv on func", "//state:extern child recv p.g\n\nfunc g(img *Image) *Image { return nil }", "7:22: //state:extern child recv on p.g: a plain func has no receiver"},
		{"extern child two", "//state:extern child a b p.g\n\nfunc g(a, b *Image) *Image { return nil }", `7:24: //state:extern child takes one parameter name, or recv; remove "b"`},
		{"extern valid on func", "//state:extern valid p.g\n\nfunc g() bool { return true }", "7:16: //state:extern valid applies to a method"},
		{"extern errmap shape", "//state:extern errmap p.g\n\nfunc g() error { return nil }", "7:16: //state:errmap on p.g: it must take an error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "package p\n\ntype Image struct{}\ntype Texture uint32\n\n\n" + tc.src + "\n"
			fset, p := parseExtern(t, src)
			var got []string
			for _, d := range p.Diagnostics {
				pos := fset.Position(d.Pos)
				if d.Analyzer != StContract || !d.End.IsValid() || d.End < d.Pos {
					t.Errorf("bad diagnostic %+v", d)
				}
				got = append(got, strconv.Itoa(pos.Line)+":"+strconv.Itoa(pos.Column)+": "+d.Message)
			}
			checkDiags(t, got, []string{tc.want})
		})
	}
}
