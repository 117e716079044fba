// Command stategen generates typed handles for state types.
//
// For each type whose doc comment holds //state:contract, stategen writes the
// file t_state.go (the type's name in lower case) next to it, with the API
// its contract allows: see package gen. Run it from go generate, as a tool
// of the module (go get -tool, or the go mod edit -tool of the README),
//
//	//go:generate go tool stategen
//
// or, without the tool directive, as go run
// github.com/gpustate/gpustate/cmd/stategen. go generate runs it on the
// package of the file ($GOFILE, $GOPACKAGE); one such line per package is
// enough, as every state type of the package is generated. Or run it on
// package patterns:
//
//	stategen ./...
//
// stategen replaces files atomically and writes only files whose content
// changes. A file it generated for a type that no longer exists is removed,
// or, while go generate runs (which reads every file it listed, after the
// generators before it), left as a build-ignored stub that a later run
// outside go generate removes. A type declared under a //go:build
// constraint is generated into a file with the same constraint, named
// after it (t_state_cuda.go). When a contract has errors, or a declaration
// of the user's takes a name stategen generates, it prints them as statevet
// does (file:line:col: message), writes nothing and exits 1.
//
// Flags:
//
//	-check        write nothing; exit 1 when a generated file is missing,
//	              out of date or left over, or a report that -report names,
//	              or a //go:generate line of the package runs stategen with,
//	              or a chart beside it, is missing or out of date (for CI)
//	-report FILE  also write the contract of every state type as Markdown,
//	              replacing FILE atomically (a regular file; a device such as
//	              /dev/stdout is written in place), with an SVG chart of each
//	              checkpointed type's trade-off beside it; "-" writes the
//	              Markdown to standard output, without charts
//	-blockbytes N the pool's PoolOptions.BlockBytes the report prices the
//	              state's blocks at (0: the runtime's own choice)
//	-version      print stategen's version and exit
//	-V=full       print the version line go vet asks of a vet tool, as
//	              statevet -V=full does
//
// "stategen help" prints the usage and the flags, "stategen help FLAG"
// what one flag does. The exit status is 0 when done, 1 for contract
// errors, stale files under -check or a failure, 2 for bad usage (an
// unknown flag, help for no such flag), as go vet and statevet exit.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpustate/gpustate/gen"
	"github.com/gpustate/gpustate/internal/version"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// A change is one file stategen writes or removes.
type change struct {
	path    string
	content []byte // nil: remove the file
	why     string // for -check: "missing", "out of date", "left over"
}

// options are the command's flags and packages.
type options struct {
	check      bool
	report     string // "" for none, "-" for standard output
	blockBytes int64  // the block size the report prices at; 0: the runtime's
	patterns   []string
}

// run is the command, with exit code 0 (done), 1 (contract errors, stale
// files under -check, or failure) or 2 (bad usage).
func run(args []string, stdout, stderr io.Writer) int {
	opts, code := parseArgs(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	pkgs, err := gen.Load("", opts.patterns...)
	if err != nil {
		fmt.Fprintf(stderr, "stategen: %v\n", err)
		return 1
	}
	if len(pkgs) == 0 {
		fmt.Fprintf(stderr, "stategen: no packages match %s\n", strings.Join(opts.patterns, " "))
		return 1
	}
	if printDiagnostics(stderr, pkgs) {
		return 1
	}
	// go generate sets $GOFILE for the commands it runs; -check, like go
	// generate, takes a stub for what it is: no file of any build.
	changes, err := plan(pkgs, opts.check || os.Getenv("GOFILE") != "")
	if err != nil {
		fmt.Fprintf(stderr, "stategen: %v\n", err)
		return 1
	}
	if opts.check {
		reports, err := reportChanges(pkgs, opts)
		if err != nil {
			fmt.Fprintf(stderr, "stategen: %v\n", err)
			return 1
		}
		return checkChanges(stderr, append(changes, reports...))
	}
	if err := apply(pkgs, changes, opts, stdout); err != nil {
		fmt.Fprintf(stderr, "stategen: %v\n", err)
		return 1
	}
	return 0
}

// parseArgs reads the flags and packages; code is the exit code when the
// command is done already (help, bad usage), -1 when it goes on.
func parseArgs(args []string, stdout, stderr io.Writer) (opts options, code int) {
	var versions version.Flags
	flags := newFlags(&opts, &versions)
	flags.SetOutput(stderr)
	flags.Usage = func() { usage(stderr, flags) }
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return opts, 0
		}
		return opts, 2
	}
	if done, err := versions.Print(stdout, "stategen"); done {
		if err != nil {
			fmt.Fprintf(stderr, "stategen: %v\n", err)
			return opts, 1
		}
		return opts, 0
	}
	if flags.Arg(0) == "help" {
		return opts, help(stdout, stderr, flags, flags.Args()[1:])
	}
	if opts.blockBytes < 0 {
		fmt.Fprintln(stderr, "stategen: -blockbytes must be 0 (the runtime's choice) or a block size in bytes")
		return opts, 2
	}
	if opts.check && opts.report == "-" {
		fmt.Fprintln(stderr, "stategen: -check compares the report with the file -report names; - names none")
		return opts, 2
	}
	opts.patterns = flags.Args()
	if len(opts.patterns) == 0 {
		if pkg := os.Getenv("GOPACKAGE"); strings.HasSuffix(pkg, "_test") {
			fmt.Fprintf(stderr, "stategen: %s: run from an external test package; state types and their handles belong in package %s\n",
				os.Getenv("GOFILE"), strings.TrimSuffix(pkg, "_test"))
			return opts, 1
		}
		opts.patterns = []string{"."}
	}
	return opts, -1
}

// newFlags returns stategen's flag set, which sets opts and versions: the
// command's, and the one that reads the arguments of a //go:generate line
// for -check.
func newFlags(opts *options, versions *version.Flags) *flag.FlagSet {
	flags := flag.NewFlagSet("stategen", flag.ContinueOnError)
	flags.BoolVar(&opts.check, "check", false, "write nothing; exit 1 when a generated file, a report or a chart is missing, out of date or left over")
	flags.StringVar(&opts.report, "report", "", "write the contract of every state type as Markdown to `file` (- for standard output), with an SVG chart per checkpointed type beside it; with -check, compare them instead")
	flags.Int64Var(&opts.blockBytes, "blockbytes", 0, "price the report's blocks at the pool's PoolOptions.BlockBytes `n` (0: the runtime's choice)")
	versions.Register(flags)
	return flags
}

// usage prints how to run stategen and its flags.
func usage(w io.Writer, flags *flag.FlagSet) {
	fmt.Fprintf(w, `usage: stategen [-check] [-report file] [-blockbytes n] [packages]
       stategen help [flag]
       stategen -version

With no packages, stategen generates the package in the current directory
(as go generate runs it). Exit status: 0 done, 1 contract errors, stale
files under -check or a failure, 2 bad usage. Flags:
`)
	flags.SetOutput(w)
	flags.PrintDefaults()
}

// help prints the usage, or what each flag named does, and returns the
// exit code: 2, after saying so, when a name is no flag's (as go help does
// for an unknown topic).
func help(stdout, stderr io.Writer, flags *flag.FlagSet, names []string) int {
	if len(names) == 0 {
		usage(stdout, flags)
		return 0
	}
	code := 0
	for _, name := range names {
		f := flags.Lookup(strings.TrimLeft(name, "-"))
		if f == nil {
			fmt.Fprintf(stderr, "stategen: no flag %q; run 'stategen help' for the flags\n", name)
			code = 2
			continue
		}
		arg, text := flag.UnquoteUsage(f)
		fmt.Fprintf(stdout, "-%s", f.Name)
		if arg != "" {
			fmt.Fprintf(stdout, " %s", arg)
		}
		fmt.Fprintf(stdout, ": %s\n", text)
	}
	return code
}

// checkChanges reports, for -check, the files not up to date.
func checkChanges(stderr io.Writer, changes []change) int {
	for _, c := range changes {
		fmt.Fprintf(stderr, "%s: %s\n", relPath(c.path), c.why)
	}
	switch len(changes) {
	case 0:
		return 0
	case 1:
		fmt.Fprintf(stderr, "stategen: 1 generated file is not up to date; run go generate\n")
	default:
		fmt.Fprintf(stderr, "stategen: %d generated files are not up to date; run go generate\n", len(changes))
	}
	return 1
}

// apply makes the changes and writes the report (see writeReport). The
// report is rendered first in memory, so that a failure leaves the files
// as they were.
func apply(pkgs []*gen.Package, changes []change, opts options, stdout io.Writer) error {
	var rep *rendered
	if opts.report != "" {
		var err error
		if rep, err = renderReport(pkgs, opts); err != nil {
			return err
		}
	}
	for _, c := range changes {
		var err error
		if c.content == nil {
			err = os.Remove(c.path)
		} else {
			err = writeFile(c.path, c.content)
		}
		if err != nil {
			return err
		}
	}
	if rep != nil {
		return rep.write(stdout)
	}
	return nil
}

// printDiagnostics prints the contract diagnostics of pkgs, and the
// declarations of the user's that take a name stategen would generate, and
// reports whether there were any.
func printDiagnostics(w io.Writer, pkgs []*gen.Package) bool {
	any := false
	for _, p := range pkgs {
		for _, d := range p.Contracts.Diagnostics {
			fmt.Fprintf(w, "%s: %s\n", posString(p, d.Pos), d.Message)
			any = true
		}
		if len(p.Contracts.Diagnostics) > 0 {
			continue // nothing is generated, so nothing clashes
		}
		for _, c := range p.Clashes() {
			fmt.Fprintf(w, "%s: %s\n", posString(p, c.Pos), c.Message)
			any = true
		}
	}
	return any
}

func posString(p *gen.Package, at token.Pos) string {
	pos := p.Fset.Position(at)
	pos.Filename = relPath(pos.Filename)
	return pos.String()
}

// plan returns the files to write, stub and remove so that every package
// holds exactly the files generated from its contracts. A generated file
// whose state type no longer exists is removed, unless go generate is
// running (inGenerate): then it becomes a build-ignored stub (gen.Stub),
// as go generate may still read it, and stubs stay until a run outside go
// generate removes them.
func plan(pkgs []*gen.Package, inGenerate bool) ([]change, error) {
	var changes []change
	for _, dir := range byDir(pkgs) {
		files, err := generate(dir)
		if err != nil {
			return nil, err
		}
		want := make(map[string]bool)
		for _, f := range files {
			want[f.Name] = true
			c, err := fileChange(filepath.Join(dir[0].Dir, f.Name), f)
			if err != nil {
				return nil, err
			}
			if c != nil {
				changes = append(changes, *c)
			}
		}
		old, err := dir[0].Generated()
		if err != nil {
			return nil, err
		}
		for _, name := range old {
			if want[name] {
				continue
			}
			c, err := leftOver(filepath.Join(dir[0].Dir, name), dir[0].Name, inGenerate)
			if err != nil {
				return nil, err
			}
			if c != nil {
				changes = append(changes, *c)
			}
		}
	}
	return changes, nil
}

// byDir groups pkgs by directory, in order: a package whose files have
// build constraints is loaded once per variant (see package gen).
func byDir(pkgs []*gen.Package) [][]*gen.Package {
	var out [][]*gen.Package
	index := make(map[string]int)
	for _, p := range pkgs {
		i, ok := index[p.Dir]
		if !ok {
			i = len(out)
			index[p.Dir] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], p)
	}
	return out
}

// generate returns the files the variants of one package generate. Files
// of types declared without constraints are generated by every variant,
// and must come out the same.
func generate(variants []*gen.Package) ([]gen.File, error) {
	var out []gen.File
	seen := make(map[string][]byte)
	for _, p := range variants {
		files, err := p.Generate()
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			prev, ok := seen[f.Name]
			switch {
			case !ok:
				seen[f.Name] = f.Content
				out = append(out, f)
			case !bytes.Equal(prev, f.Content):
				return nil, fmt.Errorf("%s: state type %s is generated differently under different build tags; declare it in a file with a //go:build line, one per variant", p.Path, f.Type)
			}
		}
	}
	return out, nil
}

// fileChange returns the change that makes the file at path hold f, nil
// when it does already.
func fileChange(path string, f gen.File) (*change, error) {
	cur, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &change{path: path, content: f.Content, why: "missing"}, nil
	case err != nil:
		return nil, err
	case bytes.Equal(cur, f.Content):
		return nil, nil
	case !bytes.HasPrefix(cur, []byte(gen.Header+"\n")):
		return nil, fmt.Errorf("%s exists and was not generated by stategen; rename it or the type %s", relPath(path), f.Type)
	}
	return &change{path: path, content: f.Content, why: "out of date"}, nil
}

// leftOver returns the change to the generated file at path whose state
// type no longer exists: nil for a stub go generate keeps or a file for
// another platform (whose types stategen cannot see here), a stub while go
// generate runs, else a removal.
func leftOver(path, pkgName string, inGenerate bool) (*change, error) {
	cur, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	stub := gen.IsStub(cur)
	switch {
	case gen.OutOfReach(cur), inGenerate && stub:
		return nil, nil
	case inGenerate:
		return &change{path: path, content: gen.Stub(pkgName), why: "left over: its state type no longer exists"}, nil
	case stub:
		return &change{path: path, why: "a stub left by go generate"}, nil
	}
	return &change{path: path, why: "left over: its state type no longer exists"}, nil
}

// writeFile replaces the file at path with data atomically: readers see the
// old content or the new, never a part.
func writeFile(path string, data []byte) (err error) {
	mode := fs.FileMode(0o644)
	if info, err := os.Stat(path); err == nil {
		mode = info.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// relPath returns path relative to the working directory when it lies
// below it, as the go command prints paths.
func relPath(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	rel, err := filepath.Rel(wd, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return path
	}
	return rel
}
