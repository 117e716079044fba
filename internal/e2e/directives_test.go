package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryDirectiveDocumented checks that docs/DIRECTIVES.md documents
// every directive: each //state: verb the README, the guide and the examples write (groups,
// replay, ...) has a row of its own in one of its tables, and each type
// directive appears in its findings table, "What each analyzer reports". A verb the examples use and the reference leaves out is a user
// left to read the code.
func TestEveryDirectiveDocumented(t *testing.T) {
	root := checkout(t)
	ref, err := os.ReadFile(filepath.Join(root, "docs", "DIRECTIVES.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(ref)
	_, findings, ok := strings.Cut(doc, "## What each analyzer reports")
	if !ok {
		t.Fatal("DIRECTIVES.md has no findings table")
	}
	_, typeSection, _ := strings.Cut(doc, "## Type directives")
	typeSection, _, _ = strings.Cut(typeSection, "## Function and method directives")
	directive := regexp.MustCompile(`//state:([a-z]+)\b`)
	used := map[string]string{} // verb -> a file that uses it
	scan := func(path string) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range directive.FindAllStringSubmatch(string(data), -1) {
			if _, ok := used[m[1]]; !ok {
				used[m[1]] = path
			}
		}
	}
	scan(filepath.Join(root, "README.md"))
	scan(filepath.Join(root, "docs", "GUIDE.md"))
	err = filepath.WalkDir(filepath.Join(root, "examples"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_state.go") {
			scan(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for verb, where := range used {
		if verb == "brnch" || verb == "ownr" {
			continue // the faulty example's misspellings
		}
		row := regexp.MustCompile("(?m)^\\| `(" + verb + ")\\b")
		if !row.MatchString(doc) {
			t.Errorf("//state:%s (used in %s) has no row in the tables of docs/DIRECTIVES.md", verb, where)
		}
		typeVerb := row.MatchString(typeSection)
		if typeVerb && !regexp.MustCompile(`\b`+verb+`\b`).MatchString(findings) {
			t.Errorf("type directive //state:%s has no row in the findings table of docs/DIRECTIVES.md", verb)
		}
	}
}
