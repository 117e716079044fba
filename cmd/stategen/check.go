package main

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpustate/gpustate/gen"
	"github.com/gpustate/gpustate/internal/version"
)

// reportChanges returns, for -check, the changes -report would make: to
// the report -report names, and to the report of each //go:generate line
// of pkgs that runs stategen with -report, as go generate would run it
// (in the package's directory, on the packages the line names, "." where
// it names none), with their charts.
func reportChanges(pkgs []*gen.Package, opts options) ([]change, error) {
	var out []change
	seen := make(map[string]bool)
	add := func(pkgs []*gen.Package, opts options) error {
		abs, err := filepath.Abs(opts.report)
		if err != nil {
			return err
		}
		if seen[abs] {
			return nil
		}
		seen[abs] = true
		r, err := renderReport(pkgs, opts)
		if err != nil {
			return err
		}
		cs, err := r.changes()
		out = append(out, cs...)
		return err
	}
	if opts.report != "" {
		if err := add(pkgs, opts); err != nil {
			return nil, err
		}
	}
	for _, dir := range byDir(pkgs) {
		for _, g := range dir[0].GoGenerate(os.Getenv) {
			args, ok := stategenArgs(g.Args)
			if !ok {
				continue
			}
			var gopts options
			flags := newFlags(&gopts, new(version.Flags))
			flags.SetOutput(io.Discard)
			if flags.Parse(args) != nil || gopts.check || gopts.report == "" || gopts.report == "-" {
				continue // go generate fails on it, or it writes no report file
			}
			if !filepath.IsAbs(gopts.report) {
				gopts.report = filepath.Join(dir[0].Dir, gopts.report)
			}
			pkgs := dir
			if patterns := flags.Args(); len(patterns) > 0 && !(len(patterns) == 1 && patterns[0] == ".") {
				var err error
				if pkgs, err = gen.Load(dir[0].Dir, patterns...); err != nil {
					return nil, err
				}
			}
			if err := add(pkgs, gopts); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// stategenArgs returns the arguments of stategen in the words of a
// //go:generate line that runs it: go run PATH, go tool NAME or PATH, or
// the command itself, PATH being the package github.com/gpustate/gpustate/
// cmd/stategen (at a version or not) or a directory ending in cmd/stategen.
func stategenArgs(words []string) ([]string, bool) {
	isStategen := func(w string) bool {
		w, _, _ = strings.Cut(w, "@")
		return w == "stategen" || strings.HasSuffix(w, "/cmd/stategen")
	}
	switch {
	case len(words) >= 3 && words[0] == "go" && words[1] == "run":
		i := 2
		for i < len(words) && strings.HasPrefix(words[i], "-") {
			i++ // go run's flags, as -mod=mod
		}
		if i < len(words) && isStategen(words[i]) {
			return words[i+1:], true
		}
	case len(words) >= 3 && words[0] == "go" && words[1] == "tool":
		if isStategen(words[2]) {
			return words[3:], true
		}
	case len(words) >= 1 && filepath.Base(words[0]) == "stategen":
		return words[1:], true
	}
	return nil, false
}

// changes returns what writing the report would change: the Markdown and
// each chart missing or out of date, and the charts it no longer links.
// Nothing for standard output or a special file, which hold nothing to
// compare.
func (r *rendered) changes() ([]change, error) {
	if r.path == "-" {
		return nil, nil
	}
	if _, regular, err := reportTarget(r.path); err != nil || !regular {
		return nil, err
	}
	var out []change
	if c, err := contentChange(r.path, r.md); err != nil {
		return nil, err
	} else if c != nil {
		out = append(out, *c)
	}
	dir := filepath.Dir(r.path)
	keep := make(map[string]bool)
	for _, ch := range r.charts {
		keep[ch.Name] = true
		c, err := contentChange(filepath.Join(dir, ch.Name), ch.SVG)
		if err != nil {
			return nil, err
		}
		if c != nil {
			out = append(out, *c)
		}
	}
	stale, err := staleCharts(dir, strings.TrimSuffix(filepath.Base(r.path), filepath.Ext(r.path)), keep)
	if err != nil {
		return nil, err
	}
	for _, path := range stale {
		out = append(out, change{path: path, why: "left over: the report no longer links it"})
	}
	return out, nil
}

// contentChange returns the change that makes the file at path hold data,
// nil when it does already.
func contentChange(path string, data []byte) (*change, error) {
	cur, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &change{path: path, content: data, why: "missing"}, nil
	case err != nil:
		return nil, err
	case bytes.Equal(cur, data):
		return nil, nil
	}
	return &change{path: path, content: data, why: "out of date"}, nil
}
