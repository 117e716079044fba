package main

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// edit is one replacement of the bytes [start, end) of a file.
type edit struct {
	start, end int
	text       string
}

// fileFix is the first suggested fix of one finding, in byte offsets.
type fileFix struct {
	f     finding
	msg   string
	edits map[string][]edit // by file name
}

// applyFixes applies the first suggested fix of each finding, prints a line
// for each one applied ("file:line: what it changed") and for each one
// skipped because it overlaps a fix applied before it, writes the changed
// files, and returns the number applied.
func applyFixes(findings []finding, w io.Writer) (int, error) {
	byFile := make(map[string][]edit)
	applied := 0
	for _, f := range findings {
		if len(f.diag.SuggestedFixes) == 0 {
			continue
		}
		fx := toFileFix(f)
		if conflicts(byFile, fx) {
			fmt.Fprintf(w, "%s: skipped %q: it overlaps a fix applied before it; run statevet -fix again\n", relPosn(f), fx.msg)
			continue
		}
		for name, es := range fx.edits {
			byFile[name] = append(byFile[name], es...)
		}
		applied++
		fmt.Fprintf(w, "%s: %s (%s)\n", relPosn(f), fx.msg, f.analyzer)
	}
	names := make([]string, 0, len(byFile))
	for name := range byFile {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := rewrite(name, byFile[name]); err != nil {
			return applied, err
		}
	}
	return applied, nil
}

func toFileFix(f finding) fileFix {
	fix := f.diag.SuggestedFixes[0]
	fx := fileFix{f: f, msg: fix.Message, edits: make(map[string][]edit)}
	for _, e := range fix.Edits {
		fx.edits[e.Filename] = append(fx.edits[e.Filename], edit{e.Start, max(e.End, e.Start), e.New})
	}
	return fx
}

// conflicts reports whether an edit of fx overlaps one already accepted
// (an identical edit, or two insertions at one offset, counts too).
func conflicts(byFile map[string][]edit, fx fileFix) bool {
	for name, es := range fx.edits {
		for _, e := range es {
			for _, o := range byFile[name] {
				if e.start < o.end && o.start < e.end || e.start == o.start {
					return true
				}
			}
		}
	}
	return false
}

// rewrite applies non-overlapping edits to the file name.
func rewrite(name string, edits []edit) error {
	src, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	slices.SortFunc(edits, func(a, b edit) int { return cmp.Compare(a.start, b.start) })
	var out bytes.Buffer
	last := 0
	for _, e := range edits {
		if e.start < last || e.end > len(src) || e.end < e.start {
			return fmt.Errorf("%s changed since it was analyzed: a fix does not apply", name)
		}
		out.Write(src[last:e.start])
		out.WriteString(e.text)
		last = e.end
	}
	out.Write(src[last:])
	info, err := os.Stat(name)
	if err != nil {
		return err
	}
	return os.WriteFile(name, out.Bytes(), info.Mode().Perm())
}

// relPosn writes the position of f as file:line, the file relative to the
// working directory when it is below it.
func relPosn(f finding) string {
	name := f.posn.Filename
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, name); err == nil && filepath.IsLocal(rel) {
			name = rel
		}
	}
	return fmt.Sprintf("%s:%d", name, f.posn.Line)
}
