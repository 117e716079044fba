package contract

import (
	"fmt"
	"go/constant"
	"go/token"
	"go/types"
	"strings"
)

// evalConst evaluates expr as an integer constant expression: the one path
// for every number a contract writes (bound=, the tag's width=, and the
// checkpoint's every=, keep= and budget=). expr is evaluated in the scope of
// the file holding pos, so it may name the package's constants and, through
// the file's imports, those of other packages (dims.Head); when no file of
// pkg holds pos, in the package scope; with pkg nil, in the universe scope.
// It returns the value, or a message saying what is wrong ("is not a
// constant").
func evalConst(pkg *types.Package, pos token.Pos, expr string) (int64, string) {
	if strings.TrimSpace(expr) == "" {
		return 0, "is empty"
	}
	tv, err := types.Eval(token.NewFileSet(), pkg, fileScopePos(pkg, pos), expr)
	if err != nil {
		return 0, "is not a valid constant expression (" + evalMessage(err) + ")"
	}
	if tv.Value == nil {
		return 0, "is not a constant"
	}
	if tv.Value.Kind() != constant.Int {
		return 0, "is not an integer constant"
	}
	v, exact := constant.Int64Val(tv.Value)
	if !exact {
		return 0, "overflows int64"
	}
	return v, ""
}

// fileScopePos returns pos when a file scope of pkg holds it, so that
// types.Eval sees that file's imports, and token.NoPos (the package scope)
// otherwise: types.Eval fails on a position outside the package's files.
func fileScopePos(pkg *types.Package, pos token.Pos) token.Pos {
	if pkg == nil || !pos.IsValid() {
		return token.NoPos
	}
	scope := pkg.Scope()
	for i := 0; i < scope.NumChildren(); i++ {
		if fs := scope.Child(i); fs.Pos() <= pos && pos <= fs.End() {
			return pos
		}
	}
	return token.NoPos
}

// evalMessage returns the type checker's message without its position.
func evalMessage(err error) string {
	if te, ok := err.(types.Error); ok {
		return te.Msg
	}
	msg := err.Error()
	if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "eval:") {
		msg = msg[i+2:]
		if j := strings.Index(msg, ": "); j >= 0 && strings.IndexFunc(msg[:j], func(r rune) bool { return r < '0' || r > '9' }) < 0 {
			msg = msg[j+2:]
		}
	}
	return msg
}

// constInt evaluates expr, written at pos, with evalConst in the package
// being parsed.
func (p *pkgParser) constInt(expr string, pos token.Pos) (int64, string) {
	return evalConst(p.pkg, pos, expr)
}

// maxStateBytes is the most bytes a state may span at its bound: 1<<48
// bytes (256 TiB), the 48-bit virtual address space of amd64 and arm64
// (4-level page tables). Every block of a state is mapped in the address
// space of the process that holds it, so no device and no host can hold a
// larger state; the bound or the widths of such a contract are mistakes.
const maxStateBytes = 1 << 48

// byteSize writes n bytes in the largest binary unit that leaves at least
// one whole unit ("8 TiB", "1.5 PiB").
func byteSize(n int64) string {
	units := []string{"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	u, f := 0, float64(n)
	for f >= 1024 && u < len(units)-1 {
		f /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%d bytes", n)
	}
	s := fmt.Sprintf("%.1f", f)
	return strings.TrimSuffix(s, ".0") + " " + units[u]
}
