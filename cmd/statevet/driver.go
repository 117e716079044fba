package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/token"
	"io"
	"os"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/gpustate/gpustate/internal/version"
)

// Exit codes of a standalone run, those of the multichecker driver.
const (
	exitClean    = 0 // no findings
	exitError    = 1 // packages that do not load, or an analyzer failed
	exitUsage    = 2 // bad flags, no packages, help for no such analyzer
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
	version   version.Flags        // -version, -V (as stategen's)
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
	fs.StringVar(&o.tags, "tags", "", "comma-separated build tags, passed to go vet as -tags")
	fs.BoolVar(&o.tests, "test", true, "report findings in test files too (go vet analyzes them either way)")
	fs.IntVar(&o.context, "c", -1, "print this many lines of source context around each finding (-1: none)")
	o.version.Register(fs)
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
		return exitUsage
	}
	if done, err := o.version.Print(stdout, "statevet"); done {
		if err != nil {
			fmt.Fprintf(stderr, "statevet: %v\n", err)
			return exitError
		}
		return exitClean
	}
	if fs.NArg() == 0 {
		usage(stderr)
		return exitUsage
	}
	if fs.Arg(0) == "help" {
		return help(stdout, stderr, analyzers, fs, fs.Args()[1:])
	}
	analyzers = o.selected(analyzers)
	res, code := goVet(fs.Args(), analyzers, o, stderr)
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
			if res, code = goVet(fs.Args(), analyzers, o, stderr); res == nil {
				return code
			}
		}
	}
	if o.json && o.sarif {
		fmt.Fprintf(stderr, "statevet: -json and -sarif exclude each other\n")
		return exitUsage
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
// several packages.
type finding struct {
	pkg      string // the package that reported it (a test variant's ID is its package's)
	analyzer string
	diag     jsonDiagnostic
	posn     token.Position // diag.Posn
}

type actionErr struct {
	pkg, analyzer string
	err           string
}

// printText prints the findings as go vet does, "file:line:col: message",
// with the analyzer's name after the message, as staticcheck prints its
// check's ("(stcleanup)": the NAME of //statevet:ignore NAME), then a line
// for each related position, and context lines when asked.
func printText(w io.Writer, res *result, context int) {
	for _, e := range res.errs {
		// An analyzer whose prerequisite failed says nothing the failed
		// one has not said.
		if !strings.HasPrefix(e.err, "failed prerequisites") {
			fmt.Fprintf(w, "%s: %s\n", e.analyzer, e.err)
		}
	}
	for _, f := range res.findings {
		line := func(posn, end, msg string) {
			fmt.Fprintf(w, "%s: %s\n", posn, msg)
			if context >= 0 {
				printContext(w, parsePosn(posn), parsePosn(end), context)
			}
		}
		line(f.diag.Posn, f.diag.End, f.diag.Message+" ("+f.analyzer+")")
		for _, r := range f.diag.Related {
			line(r.Posn, r.End, "\t"+r.Message)
		}
	}
}

func printContext(w io.Writer, posn, end token.Position, context int) {
	if end.Line < posn.Line {
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
		add(e.pkg, e.analyzer)[e.analyzer] = jsonError{e.err}
	}
	for _, f := range res.findings {
		m := add(f.pkg, f.analyzer)
		list, _ := m[f.analyzer].([]jsonDiagnostic)
		m[f.analyzer] = append(list, f.diag)
	}
	data, err := json.MarshalIndent(tree, "", "\t")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}
