package golangci

import (
	"go/ast"
	"go/token"
	"regexp"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// golangci-lint matches //nolint:NAME against the linter an issue comes
// from, and turns each related information of a diagnostic into an issue
// of its own. Under the statevet linter every finding comes from
// "statevet", so //nolint:stcleanup would silence nothing; and under
// either configuration, silencing a finding left its related information
// (the return a leak goes through) as an issue alone. So each analyzer a
// plugin runs reports through a filter that reads the file's //nolint
// comments as golangci-lint does (the comment's lines, or the whole node
// that starts on the line after a comment on lines of its own):
//
//   - a finding silenced by golangci-lint itself (//nolint, //nolint:all,
//     //nolint:LINTER) goes on to be silenced there, without its related
//     information, so that nolintlint still sees the directive used;
//   - a finding silenced by the analyzer's name under a linter of another
//     name (//nolint:stcleanup under statevet) is dropped here, with its
//     related information, since golangci-lint would not match it.

// wrap returns a copy of a whose diagnostics pass the filter for linter.
// The analyzers a plugin runs declare no facts and no sibling requires
// them, so a copy stands in for each (analyzers/suite says which).
func wrap(a *analysis.Analyzer, linter string) *analysis.Analyzer {
	w := *a
	run := a.Run
	w.Run = func(pass *analysis.Pass) (any, error) {
		p := *pass
		f := &filter{pass: pass, analyzer: a.Name, linter: linter, byFile: make(map[*token.File][]nolintRange)}
		p.Report = f.report
		return run(&p)
	}
	return &w
}

// A nolintRange is the lines one //nolint comment covers, and the names it
// lists (none: every linter).
type nolintRange struct {
	from, to int
	names    []string
}

// filter applies the //nolint comments of a pass's files to one
// analyzer's diagnostics.
type filter struct {
	pass             *analysis.Pass
	analyzer, linter string
	byFile           map[*token.File][]nolintRange
}

func (f *filter) report(d analysis.Diagnostic) {
	switch f.silenced(d.Pos) {
	case silencedHere:
		return
	case silencedThere:
		d.Related = nil
	}
	f.pass.Report(d)
}

type silence int

const (
	notSilenced   silence = iota
	silencedThere         // golangci-lint silences it
	silencedHere          // only the analyzer's name silences it
)

// silenced says how the //nolint comments covering pos treat a finding.
func (f *filter) silenced(pos token.Pos) silence {
	tf := f.pass.Fset.File(pos)
	if tf == nil {
		return notSilenced
	}
	ranges, ok := f.byFile[tf]
	if !ok {
		ranges = f.rangesOf(tf)
		f.byFile[tf] = ranges
	}
	line := tf.Line(pos)
	out := notSilenced
	for _, r := range ranges {
		if line < r.from || line > r.to {
			continue
		}
		if len(r.names) == 0 {
			return silencedThere
		}
		for _, n := range r.names {
			switch n {
			case "all", f.linter:
				return silencedThere
			case f.analyzer:
				out = silencedHere
			}
		}
	}
	return out
}

// rangesOf returns the //nolint ranges of the pass's file tf.
func (f *filter) rangesOf(tf *token.File) []nolintRange {
	for _, file := range f.pass.Files {
		if f.pass.Fset.File(file.Pos()) == tf {
			return nolintRanges(f.pass.Fset, file)
		}
	}
	return nil
}

// nolintRE is golangci-lint's test of a comment, after "//" and spaces.
var nolintRE = regexp.MustCompile(`^nolint( |:|$)`)

// nolintRanges returns the //nolint ranges of file, as golangci-lint's
// nolint filter builds them: each comment covers its group's lines, and a
// comment group that ends on the line before a node starting at the
// group's column covers that node too.
func nolintRanges(fset *token.FileSet, file *ast.File) []nolintRange {
	type inline struct {
		nolintRange
		col int
	}
	var inlines []inline
	for _, g := range file.Comments {
		for _, c := range g.List {
			names, ok := nolintNames(c.Text)
			if !ok {
				continue
			}
			start := fset.Position(g.Pos())
			inlines = append(inlines, inline{nolintRange{start.Line, fset.Position(g.End()).Line, names}, start.Column})
		}
	}
	if len(inlines) == 0 {
		return nil
	}
	out := make([]nolintRange, 0, len(inlines))
	for _, in := range inlines {
		out = append(out, in.nolintRange)
	}
	ast.Inspect(file, func(n ast.Node) bool {
		if n == nil {
			return false
		}
		start := fset.Position(n.Pos())
		for _, in := range inlines {
			if in.to == start.Line-1 && in.col == start.Column {
				r := in.nolintRange
				r.to = max(r.to, fset.Position(n.End()).Line)
				out = append(out, r)
			}
		}
		return true
	})
	return out
}

// nolintNames parses a comment as golangci-lint does: ok for a //nolint
// comment, with the names it lists, lower case (none for every linter).
func nolintNames(text string) (names []string, ok bool) {
	text = strings.TrimLeft(text, "/ ")
	if !nolintRE.MatchString(text) {
		return nil, false
	}
	if strings.HasPrefix(text, "nolint:all") || !strings.HasPrefix(text, "nolint:") {
		return nil, true
	}
	text, _, _ = strings.Cut(text, "//")
	for item := range strings.SplitSeq(strings.TrimPrefix(text, "nolint:"), ",") {
		name := strings.ToLower(strings.TrimSpace(item))
		if name == "all" {
			return nil, true
		}
		names = append(names, name)
	}
	return names, true
}
