package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/token"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"
)

// Exit codes of a standalone run, those of the multichecker driver.
const (
	exitClean    = 0 // no findings
	exitError    = 1 // packages that do not load, or an analyzer failed
	exitFindings = 3 // findings (after -fix: findings that remain)
)

// options are the flags of a standalone run.
type options struct {
	json, fix bool
	sarif     bool
	tags      string
	tests     bool
	context   int
	enable    map[string]*triState // -NAME, -NAME=false
}

// triState is a boolean flag that remembers whether it was set.
type triState struct{ set, on bool }

func (t *triState) String() string {
	if t == nil || !t.set {
		return "unset"
	}
	return fmt.Sprint(t.on)
}

func (t *triState) Set(s string) error {
	switch s {
	case "true", "1", "t", "T", "TRUE", "True":
		t.on = true
	case "false", "0", "f", "F", "FALSE", "False":
		t.on = false
	default:
		return fmt.Errorf("want true or false, have %q", s)
	}
	t.set = true
	return nil
}

func (t *triState) IsBoolFlag() bool { return true }

// flags returns the flag set of a standalone run over analyzers.
func flags(analyzers []*analysis.Analyzer, stderr io.Writer) (*flag.FlagSet, *options) {
	fs := flag.NewFlagSet("statevet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{enable: make(map[string]*triState)}
	fs.BoolVar(&o.json, "json", false, "print the findings as JSON, each once")
	fs.BoolVar(&o.sarif, "sarif", false, "print the findings as a SARIF 2.1.0 log, one rule per analyzer, for code scanning")
	fs.BoolVar(&o.fix, "fix", false, "apply the suggested fixes, print each one applied, then report the findings that remain")
	fs.StringVar(&o.tags, "tags", "", "comma-separated build tags, passed to the package loader as -tags")
	fs.BoolVar(&o.tests, "test", true, "analyze test files too")
	fs.IntVar(&o.context, "c", -1, "print this many lines of source context around each finding (-1: none)")
	for _, a := range analyzers {
		t := new(triState)
		o.enable[a.Name] = t
		fs.Var(t, a.Name, "run "+a.Name+" (with -NAME, only the analyzers named; with -NAME=false, all but those)")
	}
	return fs, o
}

// selected returns the analyzers the -NAME flags select: those set true if
// any is, else all but those set false.
func (o *options) selected(analyzers []*analysis.Analyzer) []*analysis.Analyzer {
	var on, notOff []*analysis.Analyzer
	for _, a := range analyzers {
		t := o.enable[a.Name]
		if t.set && t.on {
			on = append(on, a)
		}
		if !t.set || t.on {
			notOff = append(notOff, a)
		}
	}
	if len(on) > 0 {
		return on
	}
	return notOff
}

// standalone runs statevet on the packages named by args and returns the
// exit code.
func standalone(args []string, analyzers []*analysis.Analyzer, stdout, stderr io.Writer) int {
	fs, o := flags(analyzers, stderr)
	fs.Usage = func() { usage(stderr) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitClean
		}
		return 2
	}
	if fs.NArg() == 0 {
		usage(stderr)
		return exitError
	}
	if fs.Arg(0) == "help" {
		help(stdout, analyzers, fs, fs.Args()[1:])
		return exitClean
	}
	analyzers = o.selected(analyzers)
	res, code := analyze(fs.Args(), analyzers, o, stderr)
	if res == nil {
		return code
	}
	if o.fix {
		fixOut := stdout
		if o.json || o.sarif {
			fixOut = stderr // stdout is for the JSON
		}
		applied, err := applyFixes(res.findings, fixOut)
		if err != nil {
			fmt.Fprintf(stderr, "statevet: %v\n", err)
			return exitError
		}
		if applied > 0 {
			// Report what the fixes left: analyze the changed files afresh.
			if res, code = analyze(fs.Args(), analyzers, o, stderr); res == nil {
				return code
			}
		}
	}
	if o.json && o.sarif {
		fmt.Fprintf(stderr, "statevet: -json and -sarif exclude each other\n")
		return 2
	}
	if o.sarif {
		if err := printSARIF(stdout, res, analyzers); err != nil {
			fmt.Fprintf(stderr, "statevet: %v\n", err)
			return exitError
		}
	} else if o.json {
		if err := printJSON(stdout, res); err != nil {
			fmt.Fprintf(stderr, "statevet: %v\n", err)
			return exitError
		}
	} else {
		printText(stderr, res, o.context)
	}
	switch {
	case code != exitClean || len(res.errs) > 0:
		return exitError
	case len(res.findings) > 0 && (!o.json && !o.sarif || o.fix):
		// With -json or -sarif alone the findings are the output, as with
		// go vet -json; after -fix, findings that remain are a failure.
		return exitFindings
	}
	return exitClean
}

// result is the outcome of one analysis of the packages.
type result struct {
	findings []finding   // each once, in position order
	errs     []actionErr // analyzers that failed, in package order
}

// finding is one diagnostic, reported once even when its file belongs to
// several packages (a package and its test variant).
type finding struct {
	pkg      string // the ID of the first package that reported it
	analyzer string
	fset     *token.FileSet
	diag     analysis.Diagnostic
	posn     token.Position
}

type actionErr struct {
	pkg, analyzer string
	err           error
}

// load loads the packages named by patterns, with the build tags and test
// variants o asks for.
func load(patterns []string, o *options) ([]*packages.Package, error) {
	conf := &packages.Config{
		Mode:  packages.LoadAllSyntax | packages.NeedModule,
		Tests: o.tests,
	}
	if o.tags != "" {
		conf.BuildFlags = []string{"-tags=" + o.tags}
	}
	pkgs, err := packages.Load(conf, patterns...)
	if err == nil && len(pkgs) == 0 {
		err = fmt.Errorf("%s matched no packages", strings.Join(patterns, " "))
	}
	return pkgs, err
}

// analyze loads the packages and runs the analyzers. It returns nil and an
// exit code when nothing could be analyzed; otherwise the result, with
// exitError when some packages had errors (printed to stderr).
func analyze(patterns []string, analyzers []*analysis.Analyzer, o *options, stderr io.Writer) (*result, int) {
	pkgs, err := load(patterns, o)
	if err != nil {
		fmt.Fprintf(stderr, "statevet: %v\n", err)
		return nil, exitError
	}
	code := exitClean
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			fmt.Fprintln(stderr, e)
			code = exitError
		}
	})
	graph, err := checker.Analyze(analyzers, pkgs, nil)
	if err != nil {
		fmt.Fprintf(stderr, "statevet: %v\n", err)
		return nil, exitError
	}
	return collect(graph), code
}

// collect gathers the findings of the root actions, each once: a file that
// belongs to a package and to its test variant is analyzed twice, and the
// same diagnostic (position, analyzer, message) is kept for the package
// whose ID sorts first, the one without the test files.
func collect(graph *checker.Graph) *result {
	roots := slices.Clone(graph.Roots)
	slices.SortFunc(roots, func(a, b *checker.Action) int {
		return cmp.Or(cmp.Compare(a.Package.ID, b.Package.ID), cmp.Compare(a.Analyzer.Name, b.Analyzer.Name))
	})
	type key struct {
		posn, end, analyzer, message string
	}
	seen := make(map[key]bool)
	res := new(result)
	for act := range graph.All() {
		if act.Err != nil {
			res.errs = append(res.errs, actionErr{act.Package.ID, act.Analyzer.Name, act.Err})
		}
	}
	for _, act := range roots {
		fset := act.Package.Fset
		for _, d := range act.Diagnostics {
			posn := fset.Position(d.Pos)
			k := key{posn.String(), fset.Position(d.End).String(), act.Analyzer.Name, d.Message}
			if seen[k] {
				continue
			}
			seen[k] = true
			res.findings = append(res.findings, finding{pkg: act.Package.ID, analyzer: act.Analyzer.Name, fset: fset, diag: d, posn: posn})
		}
	}
	slices.SortStableFunc(res.findings, func(a, b finding) int {
		return cmp.Or(cmp.Compare(a.posn.Filename, b.posn.Filename), cmp.Compare(a.posn.Offset, b.posn.Offset))
	})
	slices.SortStableFunc(res.errs, func(a, b actionErr) int {
		return cmp.Or(cmp.Compare(a.pkg, b.pkg), cmp.Compare(a.analyzer, b.analyzer))
	})
	return res
}

// printText prints the findings as go vet does: "file:line:col: message",
// a line for each related position, and context lines when asked.
func printText(w io.Writer, res *result, context int) {
	for _, e := range res.errs {
		// An analyzer whose prerequisite failed says nothing the failed
		// one has not said.
		if !strings.HasPrefix(e.err.Error(), "failed prerequisites") {
			fmt.Fprintf(w, "%s: %v\n", e.analyzer, e.err)
		}
	}
	for _, f := range res.findings {
		line := func(pos, end token.Pos, msg string) {
			posn := f.fset.Position(pos)
			fmt.Fprintf(w, "%s: %s\n", posn, msg)
			if context >= 0 {
				printContext(w, posn, f.fset.Position(end), context)
			}
		}
		line(f.diag.Pos, f.diag.End, f.diag.Message)
		for _, r := range f.diag.Related {
			line(r.Pos, r.End, "\t"+r.Message)
		}
	}
}

func printContext(w io.Writer, posn, end token.Position, context int) {
	if !end.IsValid() {
		end = posn
	}
	data, err := os.ReadFile(posn.Filename)
	if err != nil {
		return
	}
	lines := strings.Split(string(data), "\n")
	for i := posn.Line - context; i <= end.Line+context; i++ {
		if 1 <= i && i <= len(lines) {
			fmt.Fprintf(w, "%d\t%s\n", i, lines[i-1])
		}
	}
}

// The JSON schema is go vet's: package ID, then analyzer name, then a list
// of diagnostics or an error.
type (
	jsonEdit struct {
		Filename string `json:"filename"`
		Start    int    `json:"start"`
		End      int    `json:"end"`
		New      string `json:"new"`
	}
	jsonFix struct {
		Message string     `json:"message"`
		Edits   []jsonEdit `json:"edits"`
	}
	jsonRelated struct {
		Posn    string `json:"posn"`
		End     string `json:"end"`
		Message string `json:"message"`
	}
	jsonDiagnostic struct {
		Category       string        `json:"category,omitempty"`
		Posn           string        `json:"posn"`
		End            string        `json:"end"`
		Message        string        `json:"message"`
		SuggestedFixes []jsonFix     `json:"suggested_fixes,omitempty"`
		Related        []jsonRelated `json:"related,omitempty"`
	}
	jsonError struct {
		Err string `json:"error"`
	}
)

// printJSON prints the findings, each once, and the analyzers' errors.
func printJSON(w io.Writer, res *result) error {
	tree := make(map[string]map[string]any)
	add := func(pkg, analyzer string) map[string]any {
		m := tree[pkg]
		if m == nil {
			m = make(map[string]any)
			tree[pkg] = m
		}
		return m
	}
	for _, e := range res.errs {
		add(e.pkg, e.analyzer)[e.analyzer] = jsonError{e.err.Error()}
	}
	for _, f := range res.findings {
		m := add(f.pkg, f.analyzer)
		list, _ := m[f.analyzer].([]jsonDiagnostic)
		m[f.analyzer] = append(list, toJSON(f))
	}
	data, err := json.MarshalIndent(tree, "", "\t")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

func toJSON(f finding) jsonDiagnostic {
	fset, d := f.fset, f.diag
	end := func(pos, end token.Pos) string { return fset.Position(cmp.Or(end, pos)).String() }
	jd := jsonDiagnostic{
		Category: d.Category,
		Posn:     f.posn.String(),
		End:      end(d.Pos, d.End),
		Message:  d.Message,
	}
	for _, fix := range d.SuggestedFixes {
		jf := jsonFix{Message: fix.Message}
		for _, e := range fix.TextEdits {
			p := fset.Position(e.Pos)
			jf.Edits = append(jf.Edits, jsonEdit{p.Filename, p.Offset, fset.Position(e.End).Offset, string(e.NewText)})
		}
		jd.SuggestedFixes = append(jd.SuggestedFixes, jf)
	}
	for _, r := range d.Related {
		jd.Related = append(jd.Related, jsonRelated{fset.Position(r.Pos).String(), end(r.Pos, r.End), r.Message})
	}
	return jd
}
