package main

import (
	"strings"
	"testing"
)

// TestPrintText checks the text output: each finding's line ends with the
// name of its analyzer, the NAME a //statevet:ignore NAME comment needs;
// related positions follow it, indented, without a name.
func TestPrintText(t *testing.T) {
	res := &result{
		findings: []finding{
			{pkg: "p", analyzer: "stcleanup", diag: jsonDiagnostic{
				Posn:    "/m/p/a.go:10:2",
				Message: "KVCacheSnapshot acquired by Snapshot is not released on every path; add defer v.Release()",
				Related: []jsonRelated{{Posn: "/m/p/a.go:14:3", Message: "this return leaks it"}},
			}},
			{pkg: "p", analyzer: "stcontract", diag: jsonDiagnostic{Posn: "/m/p/b.go:3:1", Message: "state type B has no //state:owner line"}},
		},
		errs: []actionErr{
			{"p", "stalias", "it broke"},
			{"p", "streleased", "failed prerequisites: stalias"},
		},
	}
	var b strings.Builder
	printText(&b, res, -1)
	const want = `stalias: it broke
/m/p/a.go:10:2: KVCacheSnapshot acquired by Snapshot is not released on every path; add defer v.Release() (stcleanup)
/m/p/a.go:14:3: 	this return leaks it
/m/p/b.go:3:1: state type B has no //state:owner line (stcontract)
`
	if got := b.String(); got != want {
		t.Errorf("printText printed\n%s\nwant\n%s", got, want)
	}
}
