// Package analysisutil holds helpers shared by gpustate's analyzers.
package analysisutil

import (
	"fmt"
	"go/parser"
	"go/token"
	"strings"
)

// MustExtractDoc returns the documentation of analyzer name from content, the
// source of a doc.go file whose package comment has a section headed
// "# Analyzer name" whose first line is "name: summary". It returns the
// section without the "name: " prefix, the form Analyzer.Doc expects. It panics when the section is missing: the doc.go files are
// part of the binary, so that is a bug in the program, not bad input.
func MustExtractDoc(content, name string) string {
	doc, err := ExtractDoc(content, name)
	if err != nil {
		panic(err)
	}
	return doc
}

// ExtractDoc is MustExtractDoc returning an error instead of panicking.
func ExtractDoc(content, name string) (string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", content, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		return "", fmt.Errorf("parsing doc.go: %v", err)
	}
	if f.Doc == nil {
		return "", fmt.Errorf("doc.go has no package comment")
	}
	text := f.Doc.Text()
	heading := "# Analyzer " + name
	_, rest, ok := strings.Cut(text, "\n"+heading+"\n")
	if !ok {
		return "", fmt.Errorf("doc.go has no %q section", heading)
	}
	if i := strings.Index(rest, "\n# "); i >= 0 {
		rest = rest[:i]
	}
	rest = strings.TrimSpace(rest)
	if !strings.HasPrefix(rest, name+":") {
		return "", fmt.Errorf("section %q does not start with %q", heading, name+":")
	}
	return strings.TrimSpace(strings.TrimPrefix(rest, name+":")), nil
}
