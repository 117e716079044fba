package codeshape

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// docRef is a reference to a section by its title, as comments and
	// docs write it: docs/GUIDE.md, "The cost model".
	docRef = regexp.MustCompile(`([A-Za-z/]+\.md),? "([^"]+)"`)
	// numberedRef is a reference to a section by number, which no page of
	// the repository has.
	numberedRef = regexp.MustCompile(`\b[Ss]ection \d`)
)

// TestDocReferencesExist checks every reference to a section of a page of
// the repository, in Go files and Markdown pages alike: the page exists
// and has a heading that starts with the title cited. A section cited by
// number is reported too: the pages number no section, so the reader
// could not find it.
func TestDocReferencesExist(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string][]string{}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || isModule(path)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".md") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		rel, _ := filepath.Rel(root, path)
		for i, line := range strings.Split(string(src), "\n") {
			if numberedRef.MatchString(line) {
				t.Errorf("%s:%d: cites a section by number; cite the page and the section's title", rel, i+1)
			}
			for _, m := range docRef.FindAllStringSubmatch(line, -1) {
				page := docPage(root, m[1])
				hs, ok := headings[page]
				if !ok {
					hs = readHeadings(page)
					headings[page] = hs
				}
				if hs == nil {
					t.Errorf("%s:%d: cites %s, which does not exist", rel, i+1, m[1])
					continue
				}
				if !hasHeading(hs, m[2]) {
					t.Errorf("%s:%d: cites %s, %q: no heading of the page starts so", rel, i+1, m[1], m[2])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked %d files under %s; the walk is not seeing the repository", checked, root)
	}
}

// docPage returns the path of the page a reference names: a path from
// the module's root, or a page of docs/ named alone (README.md and
// CHANGELOG.md are at the root).
func docPage(root, name string) string {
	if strings.Contains(name, "/") {
		return filepath.Join(root, filepath.FromSlash(name))
	}
	if _, err := os.Stat(filepath.Join(root, name)); err == nil {
		return filepath.Join(root, name)
	}
	return filepath.Join(root, "docs", name)
}

// readHeadings returns the titles of the Markdown headings of page; nil
// when it cannot be read.
func readHeadings(page string) []string {
	src, err := os.ReadFile(page)
	if err != nil {
		return nil
	}
	hs := []string{}
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "#") {
			hs = append(hs, strings.TrimSpace(strings.TrimLeft(line, "#")))
		}
	}
	return hs
}

// hasHeading reports whether a heading of hs starts with title.
func hasHeading(hs []string, title string) bool {
	for _, h := range hs {
		if strings.HasPrefix(h, title) {
			return true
		}
	}
	return false
}
