package contract

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"sort"
	"strings"
)

// Analyzer names used in Diagnostic.Analyzer.
const (
	StContract = "stcontract"
	StGrowth   = "stgrowth"
)

// Verbs of the directive language.
var (
	typeVerbs = []string{"contract", "growth", "owner", "retention", "snapshot", "branch", "rollback", "checkpoint", "cleanup", "block", "share", "replay", "group"}
	funcVerbs = []string{"acquire", "release", "takes", "mutates", "appends", "view", "writes", "frees", "child", "valid", "errmap"}
	allVerbs  = append(append([]string{}, typeVerbs...), funcVerbs...)
)

// durableWords are claims of durability: runtime state is never durable.
var durableWords = []string{"durable", "durability", "crash-safe", "crashsafe", "crash_safe", "persistent-storage"}

func isIn(s string, list []string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ParsePackage parses every //state: directive in files (type-checked as pkg
// with info) and validates each contract as a whole. It never panics; every
// problem is a Diagnostic. pkg and info may be nil, in which case bounds are
// evaluated in the universe scope and checks that need types are skipped.
func ParsePackage(fset *token.FileSet, files []*ast.File, pkg *types.Package, info *types.Info) *Package {
	p := &pkgParser{fset: fset, pkg: pkg, info: info, out: new(Package), files: files}
	defer func() {
		// A bug here must not crash go vet: report it where the user sees it.
		if r := recover(); r != nil {
			pos := token.NoPos
			for _, f := range files {
				if f != nil {
					pos = f.Package
					break
				}
			}
			p.out.Diagnostics = append(p.out.Diagnostics, Diagnostic{
				Pos:      pos,
				End:      pos,
				Analyzer: StContract,
				Message:  fmt.Sprintf("internal error in the //state: directive parser (%v); please report it with this package", r),
			})
		}
	}()
	for _, f := range files {
		if f == nil || !mentionsState(f) {
			continue
		}
		p.file(f)
	}
	p.checkGroups()
	sort.SliceStable(p.out.Diagnostics, func(i, j int) bool {
		return p.out.Diagnostics[i].Pos < p.out.Diagnostics[j].Pos
	})
	return p.out
}

type pkgParser struct {
	fset *token.FileSet
	pkg  *types.Package
	info *types.Info
	out  *Package
	// files are the package's files, where replay lines find their
	// input types' tags.
	files []*ast.File
	// groups are the package's groups, checked once its contracts are known.
	groups []*groupParse
	deps   map[string]*types.Package // the package's dependencies by path, once an extern line needs them
}

func (p *pkgParser) report(analyzer, typ string, pos, end token.Pos, fixes []Fix, format string, args ...any) {
	p.out.Diagnostics = append(p.out.Diagnostics, Diagnostic{
		Pos:      pos,
		End:      end,
		Analyzer: analyzer,
		Type:     typ,
		Message:  fmt.Sprintf(format, args...),
		Fixes:    fixes,
	})
}

func (p *pkgParser) errorf(typ string, pos, end token.Pos, format string, args ...any) {
	p.report(StContract, typ, pos, end, nil, format, args...)
}

// file parses the directives of one file: doc comments of type specs and
// funcs, then every other comment, where a directive is misplaced.
func (p *pkgParser) file(f *ast.File) {
	handled := make(map[*ast.CommentGroup]bool)
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.GenDecl:
			if decl.Tok != token.TYPE {
				continue
			}
			for _, spec := range decl.Specs {
				ts, ok := spec.(*ast.TypeSpec)
				if !ok || ts.Name == nil {
					continue
				}
				doc := ts.Doc
				if doc == nil && !decl.Lparen.IsValid() {
					doc = decl.Doc
				}
				if doc != nil {
					handled[doc] = true
					p.typeDoc(ts, doc)
				}
				p.ifaceMethods(ts, handled)
			}
		case *ast.FuncDecl:
			if decl.Doc != nil && decl.Name != nil {
				handled[decl.Doc] = true
				p.funcDoc(decl)
			}
		}
	}
	for _, g := range f.Comments {
		if handled[g] {
			continue
		}
		for _, c := range g.List {
			if !strings.Contains(c.Text, "state:") {
				continue
			}
			if d, ok := parseDirective(c); ok {
				if d.verb == externVerb {
					p.extern(d)
					continue
				}
				p.errorf("", d.pos, d.end,
					"//state:%s is not in the doc comment of a type or func; move it to the line directly above the declaration it describes", d.verb)
				continue
			}
			p.lookalike(c, "", placedVerbs)
		}
	}
}

// lookalike reports a comment that looks like a directive but is not one.
// It returns the verb it reported, or "".
func (p *pkgParser) lookalike(c *ast.Comment, typ string, verbs []string) string {
	verb, off, ok := lookalike(c.Text)
	if !ok {
		return ""
	}
	lower := strings.ToLower(verb)
	want := lower
	if !isIn(lower, allVerbs) {
		want = nearest(lower, verbs)
		if want == "" {
			return "" // prose such as "// state:running means ..."
		}
	}
	pos, end := c.Slash, c.End()
	switch {
	case strings.HasPrefix(c.Text, "/*"):
		p.errorf(typ, pos, end,
			"%s is a block comment, not a directive; write //state:%s as a line comment", shorten(c.Text), want)
	case strings.HasPrefix(c.Text, "//state:"):
		fix := Fix{
			Message: fmt.Sprintf("replace %s with %s", verb, want),
			Edits:   []Edit{{Pos: pos + token.Pos(off), End: pos + token.Pos(off+len(verb)), NewText: want}},
		}
		p.report(StContract, typ, pos, end, []Fix{fix},
			"//state:%s is not a directive (verbs are lowercase words); write //state:%s", verb, want)
	default:
		fix := Fix{
			Message: "remove the space after //",
			Edits:   []Edit{{Pos: pos, End: pos + token.Pos(off), NewText: "//state:"}},
		}
		if want != lower {
			fix.Edits = append(fix.Edits, Edit{Pos: pos + token.Pos(off), End: pos + token.Pos(off+len(verb)), NewText: want})
		}
		p.report(StContract, typ, pos, end, []Fix{fix},
			"%s has a space after //, so gofmt treats it as prose and the directive is lost; write //state:%s", shorten(c.Text), want)
	}
	return want
}

// shorten returns the first word of a comment, for messages.
func shorten(text string) string {
	if i := strings.IndexAny(text[2:], " \t"); i >= 0 {
		rest := strings.TrimLeft(text[2+i:], " \t")
		if j := strings.IndexAny(rest, " \t"); j >= 0 {
			rest = rest[:j]
		}
		return text[:2] + " " + rest
	}
	if len(text) > 40 {
		return text[:40] + "..."
	}
	return text
}

// claimsDurability reports a directive that claims durability, and returns
// whether it did.
func (p *pkgParser) claimsDurability(d *directive, typ, what string) bool {
	claim := ""
	if isIn(strings.ToLower(d.verb), durableWords) {
		claim = d.verb
	}
	for _, a := range d.args {
		if claim != "" {
			break
		}
		switch {
		case isIn(strings.ToLower(a.key), durableWords):
			claim = a.key
		case !a.quoted && isIn(strings.ToLower(a.value), durableWords):
			claim = a.value
		}
	}
	if claim == "" {
		return false
	}
	p.errorf(typ, d.pos, d.end,
		"%s claims durability (%s), but state and its checkpoints live in process and device memory and are lost on a crash; remove %s and persist to storage what must survive",
		what, claim, claim)
	return true
}

// unknownVerb reports a verb that is not in verbs, with the nearest one,
// which it returns ("" when none is near).
func (p *pkgParser) unknownVerb(d *directive, typ, on string, verbs []string) string {
	if s := nearest(d.verb, verbs); s != "" {
		fix := Fix{
			Message: fmt.Sprintf("replace %s with %s", d.verb, s),
			Edits:   []Edit{{Pos: d.verbPos, End: d.verbEnd, NewText: s}},
		}
		p.report(StContract, typ, d.verbPos, d.verbEnd, []Fix{fix},
			"unknown directive //state:%s on %s; did you mean %s?", d.verb, on, s)
		return s
	}
	p.errorf(typ, d.verbPos, d.verbEnd,
		"unknown directive //state:%s on %s; use one of %s", d.verb, on, strings.Join(verbs, ", "))
	return ""
}

// quote quotes a value for messages.
func quote(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return fmt.Sprintf("%q", s)
}
