package codeshape

import (
	"go/ast"
	"go/token"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"
)

// The most methods a type under runtime/state may have, and the most files
// they may be declared in: a type past them holds several features' code,
// which belongs to the features' own types (docs/INTERNALS.md, "The
// store's map").
const (
	maxMethods      = 50
	maxMethodFiles  = 4
	methodsTreeRoot = "runtime/state/"
)

// TestMethodSets reports every type under runtime/state with more methods,
// or methods in more files, than the limits allow.
func TestMethodSets(t *testing.T) {
	type typeKey struct{ pkg, name string }
	count := map[typeKey]int{}
	files := map[typeKey]map[string]bool{}
	walkSource(t, func(rel string, _ *token.FileSet, f *ast.File) {
		rel = strings.ReplaceAll(rel, "\\", "/")
		if !strings.HasPrefix(rel, methodsTreeRoot) {
			return
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) == 0 {
				continue
			}
			k := typeKey{path.Dir(rel), receiverName(fd.Recv.List[0].Type)}
			count[k]++
			if files[k] == nil {
				files[k] = map[string]bool{}
			}
			files[k][path.Base(rel)] = true
		}
	})
	if len(count) == 0 {
		t.Fatalf("no methods under %s: the walk missed the tree", methodsTreeRoot)
	}
	keys := slices.SortedFunc(maps.Keys(count), func(a, b typeKey) int { return strings.Compare(a.pkg+"."+a.name, b.pkg+"."+b.name) })
	for _, k := range keys {
		n := count[k]
		if n > maxMethods || len(files[k]) > maxMethodFiles {
			t.Errorf("%s.%s: %d methods in %d files (%s), want at most %d in at most %d: give a feature's methods to the feature's own type",
				k.pkg, k.name, n, len(files[k]), strings.Join(slices.Sorted(maps.Keys(files[k])), ", "), maxMethods, maxMethodFiles)
		}
	}
}

// receiverName returns the name of a method's receiver type: T of T, *T,
// T[P] or *T[P, Q].
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}
