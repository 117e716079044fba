package gen

import (
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A GoGenerate is one //go:generate line of a package's files.
type GoGenerate struct {
	Pos  token.Pos
	File string   // the base name of its file, go generate's $GOFILE
	Args []string // the command and its arguments, split as go generate splits them
}

// GoGenerate returns the //go:generate lines of the package's files (those
// of its build, as go generate reads them), in file and line order.
// Quoted words are unquoted and $GOFILE, $GOPACKAGE and $DOLLAR expanded;
// other variables expand with getenv.
func (p *Package) GoGenerate(getenv func(string) string) []GoGenerate {
	var out []GoGenerate
	for _, f := range p.files {
		file := filepath.Base(p.Fset.File(f.Pos()).Name())
		for _, g := range f.Comments {
			for _, c := range g.List {
				line, ok := strings.CutPrefix(c.Text, "//go:generate ")
				if !ok {
					continue
				}
				args, ok := splitGenerate(line)
				if !ok || len(args) == 0 {
					continue // go generate refuses the line itself
				}
				for i, a := range args {
					args[i] = expandGenerate(a, file, p.Name, getenv)
				}
				out = append(out, GoGenerate{Pos: c.Pos(), File: file, Args: args})
			}
		}
	}
	return out
}

// splitGenerate splits a go:generate line into words: runs of characters
// other than spaces and tabs, and Go double-quoted strings.
func splitGenerate(line string) ([]string, bool) {
	var words []string
	for {
		line = strings.TrimLeft(line, " \t")
		if line == "" {
			return words, true
		}
		if line[0] == '"' {
			q, err := strconv.QuotedPrefix(line)
			if err != nil {
				return nil, false
			}
			w, err := strconv.Unquote(q)
			if err != nil {
				return nil, false
			}
			words = append(words, w)
			line = line[len(q):]
			continue
		}
		i := strings.IndexAny(line, " \t")
		if i < 0 {
			i = len(line)
		}
		words = append(words, line[:i])
		line = line[i:]
	}
}

// expandGenerate expands the variables of a go:generate word.
func expandGenerate(word, file, pkg string, getenv func(string) string) string {
	return os.Expand(word, func(name string) string {
		switch name {
		case "GOFILE":
			return file
		case "GOPACKAGE":
			return pkg
		case "DOLLAR":
			return "$"
		}
		return getenv(name)
	})
}
