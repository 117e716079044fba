package analysisutil

import (
	"fmt"
	"go/ast"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/tools/go/analysis"
)

// Names are the analyzers a //statevet:ignore comment may name.
var Names = []string{"stcontract", "stgrowth", "stcleanup", "stalias", "streleased"}

// IgnorePrefix starts a comment that silences a finding deliberately:
//
//	//statevet:ignore stcleanup reason="the pool releases it on shutdown"
//
// on the line of the finding or the line above it.
const IgnorePrefix = "//statevet:ignore"

// WithIgnores wraps an analyzer's run function so that the
// //statevet:ignore comments of the package apply to every diagnostic it
// reports, whichever driver runs it (go vet, statevet, golangci-lint, nogo):
//
//	Run: analysisutil.WithIgnores(run),
//
// A comment naming the analyzer silences its findings on the comment's line
// and, unless code precedes the comment on its line, on the line below. The analyzer itself reports, at the comment, an
// ignore without a reason (which silences nothing) and, once run returns
// without error, an ignore that silenced nothing. The stcontract analyzer
// also reports comments that name no analyzer or an unknown one.
func WithIgnores(run func(*analysis.Pass) (any, error)) func(*analysis.Pass) (any, error) {
	return func(pass *analysis.Pass) (any, error) {
		name := pass.Analyzer.Name
		report := pass.Report
		var mine []*ignore // the well-formed ignores naming this analyzer
		for _, ig := range parseIgnores(pass.Fset, pass.Files) {
			switch {
			case ig.err != "":
				if name == Names[0] {
					report(analysis.Diagnostic{Pos: ig.pos, End: ig.end, Message: ig.err})
				}
				continue
			case name == Names[0]:
				for _, n := range ig.names {
					if !slices.Contains(Names, n) {
						report(analysis.Diagnostic{Pos: ig.pos, End: ig.end, Message: unknownName(n)})
					}
				}
			}
			if !slices.Contains(ig.names, name) {
				continue
			}
			if ig.reason == "" {
				report(analysis.Diagnostic{Pos: ig.pos, End: ig.end, Message: fmt.Sprintf(
					"%s %s has no reason, so it silences nothing: add reason=\"why this finding is wrong or accepted\"", IgnorePrefix, name)})
				continue
			}
			mine = append(mine, ig)
		}
		if len(mine) > 0 {
			pass.Report = func(d analysis.Diagnostic) {
				posn := pass.Fset.PositionFor(d.Pos, false)
				silenced := false
				for _, ig := range mine {
					if ig.file == posn.Filename && (ig.line == posn.Line || !ig.trailing && ig.line+1 == posn.Line) {
						ig.used = true
						silenced = true
					}
				}
				if !silenced {
					report(d)
				}
			}
			defer func() { pass.Report = report }()
		}
		res, err := run(pass)
		if err != nil {
			return res, err
		}
		for _, ig := range mine {
			if len(ig.known()) > 1 {
				settleShared(pass.Fset, ig, name, report)
				continue
			}
			if !ig.used {
				report(analysis.Diagnostic{Pos: ig.pos, End: ig.end, Message: fmt.Sprintf(
					"%s %s silences nothing: no %s finding on this line or the next; remove the comment", IgnorePrefix, name, name)})
			}
		}
		return res, nil
	}
}

// An ignore naming several analyzers (//statevet:ignore stgrowth,streleased)
// is used when any of them has a finding there. The analyzers run apart,
// each in its own pass, but every driver runs the passes of one package in
// one process: each named analyzer records here, when its pass ends,
// whether it used the ignore, and the last of them to end reports it if
// none did. Where a driver does not run every named analyzer, nobody is
// last and nothing is reported.
var shared struct {
	sync.Mutex
	m map[sharedKey]*sharedUse
}

// sharedKey identifies one ignore comment of one load of a package.
type sharedKey struct {
	fset *token.FileSet
	pos  token.Pos
}

// sharedUse is what the analyzers an ignore names have recorded of it.
type sharedUse struct {
	done []string // the analyzers whose pass has ended
	used bool
}

// settleShared records that analyzer name's pass has ended with ig used or
// not, and reports ig as silencing nothing when name is the last of the
// analyzers ig names to end and none of them used it.
func settleShared(fset *token.FileSet, ig *ignore, name string, report func(analysis.Diagnostic)) {
	names := ig.known()
	key := sharedKey{fset, ig.pos}
	shared.Lock()
	if shared.m == nil {
		shared.m = make(map[sharedKey]*sharedUse)
	}
	u := shared.m[key]
	if u == nil {
		u = &sharedUse{}
		shared.m[key] = u
	}
	u.used = u.used || ig.used
	if !slices.Contains(u.done, name) {
		u.done = append(u.done, name)
	}
	last := len(u.done) == len(names)
	if last {
		delete(shared.m, key)
	}
	used := u.used
	shared.Unlock()
	if last && !used {
		list := strings.Join(names, ",")
		report(analysis.Diagnostic{Pos: ig.pos, End: ig.end, Message: fmt.Sprintf(
			"%s %s silences nothing: no %s finding on this line or the next; remove the comment", IgnorePrefix, list, strings.Join(names, " or "))})
	}
}

// known returns the statevet analyzers among the names of ig, each once.
func (ig *ignore) known() []string {
	var out []string
	for _, n := range ig.names {
		if slices.Contains(Names, n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// ignore is one //statevet:ignore comment.
type ignore struct {
	pos, end token.Pos
	file     string
	line     int
	trailing bool // code precedes it on its line, so it covers that line only
	names    []string
	reason   string
	err      string // why the comment is malformed, if it is
	used     bool
}

// parseIgnores returns the //statevet:ignore comments of files, in order.
func parseIgnores(fset *token.FileSet, files []*ast.File) []*ignore {
	var igs []*ignore
	for _, f := range files {
		var first map[int]token.Pos // the first code position of each line
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				rest, ok := strings.CutPrefix(c.Text, IgnorePrefix)
				if !ok || rest != "" && rest[0] != ' ' && rest[0] != '\t' {
					continue
				}
				posn := fset.PositionFor(c.Pos(), false)
				ig := &ignore{pos: c.Pos(), end: c.End(), file: posn.Filename, line: posn.Line}
				ig.names, ig.reason, ig.err = parseIgnore(rest)
				if first == nil {
					first = codeStarts(fset, f)
				}
				if p, ok := first[ig.line]; ok && p < c.Pos() {
					ig.trailing = true
				}
				igs = append(igs, ig)
			}
		}
	}
	return igs
}

// codeStarts returns the first position of code (not comments) on each line
// of f that has code.
func codeStarts(fset *token.FileSet, f *ast.File) map[int]token.Pos {
	first := make(map[int]token.Pos)
	note := func(p token.Pos) {
		line := fset.PositionFor(p, false).Line
		if q, ok := first[line]; !ok || p < q {
			first[line] = p
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n.(type) {
		case nil:
			return false
		case *ast.CommentGroup, *ast.Comment:
			return false
		}
		note(n.Pos())
		note(n.End() - 1)
		return true
	})
	return first
}

// parseIgnore parses the text after //statevet:ignore: a comma-separated
// list of analyzer names, then an optional reason="..." (a Go string), then
// optionally a further comment starting with //.
func parseIgnore(s string) (names []string, reason, err string) {
	const usage = `: write //statevet:ignore ANALYZER reason="why"`
	s = strings.TrimSpace(s)
	list, rest, _ := strings.Cut(s, " ")
	if list == "" || strings.HasPrefix(list, "reason=") || strings.HasPrefix(list, "//") {
		return nil, "", IgnorePrefix + " names no analyzer" + usage
	}
	for n := range strings.SplitSeq(list, ",") {
		if n == "" {
			return nil, "", fmt.Sprintf("%s %s: empty analyzer name in the list%s", IgnorePrefix, list, usage)
		}
		names = append(names, n)
	}
	rest = strings.TrimSpace(rest)
	if rest == "" || strings.HasPrefix(rest, "//") {
		return names, "", ""
	}
	q, ok := strings.CutPrefix(rest, "reason=")
	if !ok {
		return nil, "", fmt.Sprintf("%s: unexpected %q%s", IgnorePrefix, beforeComment(rest), usage)
	}
	quoted, err2 := strconv.QuotedPrefix(q)
	if err2 != nil {
		return nil, "", fmt.Sprintf("%s: the reason is not a quoted string%s", IgnorePrefix, usage)
	}
	if tail := strings.TrimSpace(q[len(quoted):]); tail != "" && !strings.HasPrefix(tail, "//") {
		return nil, "", fmt.Sprintf("%s: unexpected %q after the reason%s", IgnorePrefix, beforeComment(tail), usage)
	}
	reason, _ = strconv.Unquote(quoted)
	return names, strings.TrimSpace(reason), ""
}

// beforeComment returns s up to a further // comment.
func beforeComment(s string) string {
	s, _, _ = strings.Cut(s, "//")
	return strings.TrimSpace(s)
}

// unknownName is the message for an ignore naming no statevet analyzer.
func unknownName(n string) string {
	msg := fmt.Sprintf("%s names %q, which is no statevet analyzer (%s)", IgnorePrefix, n, strings.Join(Names, ", "))
	best, dist := "", 3
	for _, m := range Names {
		if d := levenshtein(n, m); d < dist {
			best, dist = m, d
		}
	}
	if best != "" {
		msg += fmt.Sprintf(": did you mean %s?", best)
	}
	return msg
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
