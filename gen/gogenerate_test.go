package gen

import (
	"slices"
	"testing"
)

// TestSplitGenerate checks that go:generate lines split as go generate
// splits them: words, and Go strings in double quotes as one word.
func TestSplitGenerate(t *testing.T) {
	for line, want := range map[string][]string{
		"go tool stategen -report CONTRACTS.md":   {"go", "tool", "stategen", "-report", "CONTRACTS.md"},
		"stategen\t-report \"my report.md\"  ./.": {"stategen", "-report", "my report.md", "./."},
		"": nil,
	} {
		got, ok := splitGenerate(line)
		if !ok || !slices.Equal(got, want) {
			t.Errorf("splitGenerate(%q) = %q, %t; want %q", line, got, ok, want)
		}
	}
	if _, ok := splitGenerate(`stategen "unterminated`); ok {
		t.Error("an unterminated string splits")
	}
	env := func(name string) string { return map[string]string{"HOME": "/h"}[name] }
	if got := expandGenerate("$GOPACKAGE-$GOFILE$DOLLAR$HOME", "a.go", "p", env); got != "p-a.go$/h" {
		t.Errorf("expandGenerate: %q", got)
	}
}
