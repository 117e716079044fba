package analysisutil

import "testing"

func TestExtractDoc(t *testing.T) {
	const src = `// Package x does things.
//
// # Analyzer x
//
// x: check things
//
// More about x.
//
// # Other
//
// Not part of it.
package x
`
	got, err := ExtractDoc(src, "x")
	if err != nil {
		t.Fatal(err)
	}
	if want := "check things\n\nMore about x."; got != want {
		t.Errorf("ExtractDoc = %q, want %q", got, want)
	}
	if _, err := ExtractDoc(src, "y"); err == nil {
		t.Error("ExtractDoc of a missing section succeeded")
	}
	if _, err := ExtractDoc("package x\n", "x"); err == nil {
		t.Error("ExtractDoc without a package comment succeeded")
	}
}
