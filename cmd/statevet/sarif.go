package main

import (
	"cmp"
	"encoding/json"
	"go/token"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/tools/go/analysis"

	"github.com/gpustate/gpustate/internal/sarif"
	"github.com/gpustate/gpustate/internal/version"
)

// srcRoot is the base of the relative URIs of a SARIF log: the directory
// statevet ran in, which GitHub code scanning takes as the repository root.
const srcRoot = "%SRCROOT%"

// printSARIF prints the findings as a SARIF 2.1.0 log with one rule per
// analyzer run. Its bytes depend only on the findings and the directory
// statevet runs in: files under it get URIs relative to %SRCROOT%.
func printSARIF(w io.Writer, res *result, analyzers []*analysis.Analyzer) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	s := &sarifWriter{wd: wd, lines: make(map[string][]string)}
	run := sarif.Run{
		Tool: sarif.Tool{Driver: sarif.Driver{
			Name:           "statevet",
			Version:        version.String(),
			InformationURI: "https://pkg.go.dev/github.com/gpustate/gpustate/cmd/statevet",
			Rules:          []sarif.Rule{},
		}},
		OriginalURIBaseIDs: map[string]sarif.ArtifactLocation{srcRoot: {URI: fileURI(wd) + "/"}},
		ColumnKind:         "utf16CodeUnits",
		Results:            []sarif.Result{},
	}
	index := make(map[string]int)
	for _, a := range analyzers {
		index[a.Name] = len(run.Tool.Driver.Rules)
		doc := strings.TrimSpace(a.Doc)
		title, _, _ := strings.Cut(doc, "\n")
		run.Tool.Driver.Rules = append(run.Tool.Driver.Rules, sarif.Rule{
			ID:                   a.Name,
			Name:                 a.Name,
			ShortDescription:     &sarif.Message{Text: title},
			FullDescription:      &sarif.Message{Text: doc},
			HelpURI:              a.URL,
			DefaultConfiguration: &sarif.Configuration{Level: "error"},
		})
	}
	for _, f := range res.findings {
		r := sarif.Result{
			RuleID:    f.analyzer,
			RuleIndex: index[f.analyzer],
			Level:     "error",
			Message:   sarif.Message{Text: f.diag.Message},
			Locations: []sarif.Location{{PhysicalLocation: s.location(f.diag.Posn, f.diag.End)}},
		}
		for i, rel := range f.diag.Related {
			id := i + 1
			r.RelatedLocations = append(r.RelatedLocations, sarif.Location{
				ID:               &id,
				PhysicalLocation: s.location(rel.Posn, rel.End),
				Message:          &sarif.Message{Text: rel.Message},
			})
		}
		for _, fix := range f.diag.SuggestedFixes {
			r.Fixes = append(r.Fixes, s.fix(fix))
		}
		run.Results = append(run.Results, r)
	}
	log := sarif.Log{Schema: sarif.Schema, Version: sarif.Version, Runs: []sarif.Run{run}}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(log)
}

// sarifWriter turns token positions into SARIF locations.
type sarifWriter struct {
	wd    string
	lines map[string][]string // the lines of each file read, for UTF-16 columns
}

// artifact returns the location of a file: relative to %SRCROOT% when under
// the working directory, else an absolute file URI.
func (s *sarifWriter) artifact(filename string) sarif.ArtifactLocation {
	if rel, err := filepath.Rel(s.wd, filename); err == nil && filepath.IsLocal(rel) {
		return sarif.ArtifactLocation{URI: relURI(rel), URIBaseID: srcRoot}
	}
	return sarif.ArtifactLocation{URI: fileURI(filename)}
}

func (s *sarifWriter) location(posn, end string) sarif.PhysicalLocation {
	start, stop := parsePosn(posn), parsePosn(cmp.Or(end, posn))
	if stop.Filename != start.Filename || stop.Line < start.Line || stop.Line == start.Line && stop.Column < start.Column {
		stop = start
	}
	return sarif.PhysicalLocation{
		ArtifactLocation: s.artifact(start.Filename),
		Region: &sarif.Region{
			StartLine:   start.Line,
			StartColumn: s.column(start),
			EndLine:     stop.Line,
			EndColumn:   s.column(stop),
		},
	}
}

// column converts a position's byte column into UTF-16 code units, SARIF's
// default column kind, reading the file once. Where the file cannot be
// read, the byte column stands.
func (s *sarifWriter) column(p token.Position) int {
	lines, ok := s.lines[p.Filename]
	if !ok {
		if data, err := os.ReadFile(p.Filename); err == nil {
			lines = strings.Split(string(data), "\n")
		}
		s.lines[p.Filename] = lines
	}
	if p.Line < 1 || p.Line > len(lines) || p.Column < 1 {
		return max(p.Column, 1)
	}
	prefix := lines[p.Line-1]
	if p.Column-1 > len(prefix) {
		return p.Column
	}
	prefix = prefix[:p.Column-1]
	if !utf8.ValidString(prefix) {
		return p.Column
	}
	return len(utf16.Encode([]rune(prefix))) + 1
}

func (s *sarifWriter) fix(fix jsonFix) sarif.Fix {
	out := sarif.Fix{Description: sarif.Message{Text: fix.Message}}
	byFile := make(map[string]int) // index in out.ArtifactChanges
	for _, e := range fix.Edits {
		offset, length := e.Start, max(e.End-e.Start, 0)
		i, ok := byFile[e.Filename]
		if !ok {
			i = len(out.ArtifactChanges)
			byFile[e.Filename] = i
			out.ArtifactChanges = append(out.ArtifactChanges, sarif.ArtifactChange{ArtifactLocation: s.artifact(e.Filename)})
		}
		out.ArtifactChanges[i].Replacements = append(out.ArtifactChanges[i].Replacements, sarif.Replacement{
			DeletedRegion:   sarif.Region{ByteOffset: &offset, ByteLength: &length},
			InsertedContent: &sarif.Content{Text: e.New},
		})
	}
	return out
}

// relURI is a relative path as a URI reference.
func relURI(rel string) string {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// fileURI is an absolute path as a file URI.
func fileURI(abs string) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
	if !strings.HasPrefix(u.Path, "/") {
		u.Path = "/" + u.Path // a Windows drive letter
	}
	return u.String()
}
