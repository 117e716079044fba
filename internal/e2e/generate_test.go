package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestGenerateLineAgrees checks that the user's documents write the
// go:generate line the README's setup makes work, go tool stategen,
// rather than each its own.
func TestGenerateLineAgrees(t *testing.T) {
	root := checkout(t)
	line := regexp.MustCompile(`(?m)^//go:generate (.*)$`)
	for _, doc := range []string{"README.md", "docs/GUIDE.md", "docs/STATEGEN.md"} {
		data, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		ms := line.FindAllStringSubmatch(string(data), -1)
		if len(ms) == 0 {
			t.Errorf("%s shows no //go:generate line", doc)
		}
		for _, m := range ms {
			if m[1] != "go tool stategen" {
				t.Errorf("%s: //go:generate %s, want //go:generate go tool stategen, as the README's setup runs it", doc, m[1])
			}
		}
	}
}
