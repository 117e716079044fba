package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpustate/gpustate/gen"
	"github.com/gpustate/gpustate/gen/report"
)

// Where -report writes:
//
//   - "-": the Markdown to standard output, with no charts (nothing to link
//     them from);
//   - a path to a regular file, or to nothing yet: the file is replaced
//     atomically (a temporary file renamed over it) when its content
//     changes, and the SVG charts go beside it, their stale ones removed;
//   - a path through a symbolic link to a regular file: the same, for the
//     file the link names, which the link keeps naming;
//   - anything else (/dev/stdout, a pipe, a terminal, or a link into /dev
//     or /proc): written in place, opened for writing only, never read
//     first nor replaced; no charts.

// rendered is a report ready to write.
type rendered struct {
	path   string // "-" for standard output
	md     []byte
	charts []report.Chart
}

// renderReport renders the report of pkgs for -report.
func renderReport(pkgs []*gen.Package, opts options) (*rendered, error) {
	r := &rendered{path: opts.report}
	target, regular, err := reportTarget(opts.report)
	if err != nil {
		return nil, err
	}
	var prefix string
	if regular {
		r.path = target
		prefix = strings.TrimSuffix(filepath.Base(target), filepath.Ext(target))
	}
	r.md, r.charts, err = report.Render(pkgs, report.Options{BlockBytes: opts.blockBytes, Charts: prefix})
	return r, err
}

// reportTarget resolves the report's path: the file to replace and true
// for a regular file (or none yet), the path itself and false for
// standard output or a special file.
func reportTarget(path string) (string, bool, error) {
	if path == "-" {
		return path, false, nil
	}
	info, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return path, true, nil
	case err != nil:
		return "", false, err
	case info.Mode().IsRegular():
		return path, true, nil
	case info.IsDir():
		return "", false, fmt.Errorf("-report %s: a directory, not a file", path)
	case info.Mode()&fs.ModeSymlink == 0, throughSpecial(path):
		return path, false, nil
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", false, fmt.Errorf("-report %s: a link to nothing", path)
		}
		return "", false, err
	}
	tinfo, err := os.Stat(target)
	if err != nil {
		return "", false, err
	}
	if tinfo.Mode().IsRegular() {
		return target, true, nil
	}
	return path, false, nil
}

// throughSpecial reports whether path, or a link on the way from it to
// what it names, lies in /dev or /proc: /dev/stdout names the process's
// standard output even where that is a regular file, which must be written
// through, not replaced.
func throughSpecial(path string) bool {
	p, err := filepath.Abs(path)
	if err != nil {
		return true
	}
	for range 40 {
		if underSpecial(p) {
			return true
		}
		next, err := os.Readlink(p)
		if err != nil {
			return false
		}
		if !filepath.IsAbs(next) {
			next = filepath.Join(filepath.Dir(p), next)
		}
		p = next
	}
	return true // a loop; EvalSymlinks will say so
}

// underSpecial reports whether path lies in /dev or /proc, whose entries
// stand for descriptors and devices rather than files.
func underSpecial(path string) bool {
	for _, dir := range []string{"/dev/", "/proc/"} {
		if strings.HasPrefix(path, dir) {
			return true
		}
	}
	return false
}

// write writes the report and its charts.
func (r *rendered) write(stdout io.Writer) error {
	if r.path == "-" {
		_, err := stdout.Write(r.md)
		return err
	}
	if _, regular, err := reportTarget(r.path); err != nil {
		return err
	} else if !regular {
		return writeInPlace(r.path, r.md)
	}
	dir := filepath.Dir(r.path)
	keep := make(map[string]bool)
	for _, c := range r.charts {
		keep[c.Name] = true
		if err := replaceIfChanged(filepath.Join(dir, c.Name), c.SVG); err != nil {
			return err
		}
	}
	stale, err := staleCharts(dir, strings.TrimSuffix(filepath.Base(r.path), filepath.Ext(r.path)), keep)
	if err != nil {
		return err
	}
	for _, path := range stale {
		if err := os.Remove(path); err != nil {
			return err
		}
	}
	return replaceIfChanged(r.path, r.md)
}

// writeInPlace writes data to a file that is not to be replaced: opened
// for writing only, truncated where that means anything.
func writeInPlace(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// replaceIfChanged replaces the regular file at path atomically, unless it
// holds data already.
func replaceIfChanged(path string, data []byte) error {
	if info, err := os.Lstat(path); err == nil && info.Mode().IsRegular() {
		if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
			return nil
		}
	}
	return writeFile(path, data)
}

// staleCharts returns the charts stategen wrote beside the report named
// prefix that the report no longer links.
func staleCharts(dir, prefix string, keep map[string]bool) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(dir, globEscape(prefix)+"-*.svg"))
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, m := range matches {
		if keep[filepath.Base(m)] {
			continue
		}
		info, err := os.Lstat(m)
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		head := make([]byte, 512)
		f, err := os.Open(m)
		if err != nil {
			return nil, err
		}
		n, _ := io.ReadFull(f, head)
		f.Close()
		if bytes.Contains(head[:n], []byte(report.SVGMarker)) {
			stale = append(stale, m)
		}
	}
	return stale, nil
}

// globEscape escapes the pattern characters of s for filepath.Glob.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
