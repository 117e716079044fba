package gen

import (
	"bytes"
	"go/build"
	"go/build/constraint"
	"go/token"
	"os"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"

	"github.com/gpustate/gpustate/contract"
)

// State types declared in files with build constraints are generated per
// constraint: the file generated for a type declared under //go:build C
// carries the same constraint and is named t_state_c.go (C spelt as a file
// name), so each build gets the handles of the variant it compiles. Load
// sees the files the current build excludes too: for each such file that
// declares a contract, it loads the package again with build tags that
// satisfy the file's constraint, and keeps the contracts of those files.

// loadVariants loads the variants of pkgs that the current build excludes:
// one Package per set of tags, holding only the contracts of the files
// that the current build excludes and those tags include.
func loadVariants(dir string, pkgs []*packages.Package) ([]*Package, error) {
	var out []*Package
	for _, p := range pkgs {
		groups, order := excludedContracts(p)
		taken := make(map[string]bool)
		for _, key := range order {
			tags := strings.Split(key, ",")
			loaded, err := packages.Load(loadConfig(dir, tags), p.PkgPath)
			if err != nil {
				return nil, err
			}
			vs, err := wrapLoaded(loaded)
			if err != nil {
				return nil, err
			}
			var files []string
			for _, f := range groups[key] {
				if !taken[f] {
					taken[f] = true
					files = append(files, f)
				}
			}
			for _, v := range vs {
				v.keepFiles(files)
				out = append(out, v)
			}
		}
	}
	return out, nil
}

// excludedContracts returns the files of p that the current build excludes
// and that declare a contract, grouped by the build tags (joined by commas)
// that include them, and the groups in order.
func excludedContracts(p *packages.Package) (map[string][]string, []string) {
	groups := make(map[string][]string)
	var order []string
	for _, path := range p.IgnoredFiles {
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(src, []byte("//state:contract")) || bytes.HasPrefix(src, []byte(Header+"\n")) {
			continue
		}
		expr := buildConstraint(src)
		if expr == nil {
			continue // excluded by its name (_windows.go): not for this platform
		}
		tags, ok := satisfy(expr)
		if !ok {
			continue // needs another GOOS or GOARCH
		}
		key := strings.Join(tags, ",")
		if _, seen := groups[key]; !seen {
			order = append(order, key)
		}
		groups[key] = append(groups[key], path)
	}
	return groups, order
}

// keepFiles drops the contracts and diagnostics of p that are not in the
// given files.
func (p *Package) keepFiles(files []string) {
	in := func(pos token.Pos) bool { return slices.Contains(files, p.Fset.Position(pos).Filename) }
	c := p.Contracts
	keep := c.Contracts[:0]
	for _, x := range c.Contracts {
		if in(x.Pos) {
			keep = append(keep, x)
		}
	}
	c.Contracts = keep
	diags := c.Diagnostics[:0]
	for _, d := range c.Diagnostics {
		if in(d.Pos) {
			diags = append(diags, d)
		}
	}
	c.Diagnostics = diags
}

// buildConstraint returns the //go:build constraint of a Go file, nil when
// it has none.
func buildConstraint(src []byte) constraint.Expr {
	for _, line := range strings.Split(string(src), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "package ") {
			return nil
		}
		if constraint.IsGoBuild(line) {
			if expr, err := constraint.Parse(line); err == nil {
				return expr
			}
		}
	}
	return nil
}

// fixed reports whether the go command decides tag itself (the platform,
// the compiler, cgo, the Go release), and if so whether it holds.
func fixed(tag string) (holds, isFixed bool) {
	switch {
	case tag == runtime.GOOS || tag == runtime.GOARCH || tag == runtime.Compiler:
		return true, true
	case tag == "unix":
		return slices.Contains(unixOS, runtime.GOOS), true
	case tag == "cgo":
		return build.Default.CgoEnabled, true
	case strings.HasPrefix(tag, "go1."):
		return slices.Contains(build.Default.ReleaseTags, tag), true
	case slices.Contains(knownOS, tag) || slices.Contains(knownArch, tag) || tag == "gc" || tag == "gccgo":
		return false, true
	}
	return false, false
}

// satisfy returns build tags that make expr hold on this platform, in
// sorted order, and false when none do: tags the go command decides are
// taken as they are, and at most 8 others are tried both ways.
func satisfy(expr constraint.Expr) ([]string, bool) {
	var free []string
	expr.Eval(func(tag string) bool {
		if _, isFixed := fixed(tag); !isFixed && !slices.Contains(free, tag) {
			free = append(free, tag)
		}
		return false
	})
	if len(free) > 8 {
		return nil, false
	}
	slices.Sort(free)
	for mask := range 1 << len(free) {
		on := func(tag string) bool {
			if holds, isFixed := fixed(tag); isFixed {
				return holds
			}
			i := slices.Index(free, tag)
			return mask&(1<<i) != 0
		}
		if expr.Eval(on) {
			var tags []string
			for i, t := range free {
				if mask&(1<<i) != 0 {
					tags = append(tags, t)
				}
			}
			return tags, len(tags) > 0
		}
	}
	return nil, false
}

// constraintFile returns the name of the file generated for state type
// typ declared under constraint expr: t_state_<expr spelt with letters,
// digits and underscores>.go. A name whose last word is a GOOS or GOARCH
// would carry an implicit constraint of its own, so "_tags" follows it.
func constraintFile(typ string, expr constraint.Expr) string {
	r := strings.NewReplacer("!", "not", "&&", "and", "||", "or", "(", "", ")", "")
	words := strings.Fields(r.Replace(expr.String()))
	for i, w := range words {
		words[i] = strings.Map(func(r rune) rune {
			if r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
				return r
			}
			return -1
		}, w)
	}
	last := words[len(words)-1]
	if slices.Contains(knownOS, last) || slices.Contains(knownArch, last) {
		words = append(words, "tags")
	}
	return contract.GeneratedNames(typ).VariantFile(strings.ToLower(strings.Join(words, "_")))
}

// fileConstraint returns the //go:build constraint of the file of p named
// name, nil when it has none.
func (p *Package) fileConstraint(name string) constraint.Expr {
	for _, f := range p.files {
		if p.Fset.Position(f.Package).Filename != name {
			continue
		}
		for _, g := range f.Comments {
			if g.Pos() > f.Package {
				break
			}
			for _, c := range g.List {
				if constraint.IsGoBuild(c.Text) {
					if expr, err := constraint.Parse(c.Text); err == nil {
						return expr
					}
				}
			}
		}
	}
	return nil
}

// The platforms the go command knows (go tool dist list), for tags that
// -tags cannot set.
var (
	knownOS = []string{"aix", "android", "darwin", "dragonfly", "freebsd", "hurd", "illumos", "ios", "js", "linux",
		"nacl", "netbsd", "openbsd", "plan9", "solaris", "wasip1", "windows", "zos"}
	unixOS    = []string{"aix", "android", "darwin", "dragonfly", "freebsd", "hurd", "illumos", "ios", "linux", "netbsd", "openbsd", "solaris"}
	knownArch = []string{"386", "amd64", "amd64p32", "arm", "armbe", "arm64", "arm64be", "loong64", "mips", "mipsle", "mips64",
		"mips64le", "mips64p32", "mips64p32le", "ppc", "ppc64", "ppc64le", "riscv", "riscv64", "s390", "s390x", "sparc",
		"sparc64", "wasm"}
)

// OutOfReach reports whether a Go file's build constraint excludes it from
// every build stategen loads on this platform, even with tags: a file
// generated for another GOOS or GOARCH, which stategen, seeing none of its
// types, must leave alone rather than take for left over.
func OutOfReach(src []byte) bool {
	expr := buildConstraint(src)
	if expr == nil {
		return false
	}
	if _, ok := satisfy(expr); ok {
		return false
	}
	return !expr.Eval(func(tag string) bool {
		holds, _ := fixed(tag)
		return holds
	})
}
