package main

import (
	"go/token"
	"strings"
	"testing"
)

// TestParseVetJSON reads go vet -json output: one JSON value per package,
// the same finding from a package and its test variant kept once under the
// package's own ID, errors kept, test files' findings dropped with -test=false.
func TestParseVetJSON(t *testing.T) {
	const out = `{
	"p": {
		"stgrowth": [{"posn": "/m/p/b.go:3:1", "end": "/m/p/b.go:3:9", "message": "second"}]
	}
}
{
	"p [p.test]": {
		"stgrowth": [
			{"posn": "/m/p/b.go:3:1", "end": "/m/p/b.go:3:9", "message": "second"},
			{"posn": "/m/p/a.go:10:2", "end": "/m/p/a.go:10:5", "message": "first"},
			{"posn": "/m/p/a_test.go:1:1", "end": "/m/p/a_test.go:1:1", "message": "in a test"}
		],
		"stcleanup": {"error": "it broke"}
	}
}
`
	for _, tests := range []bool{true, false} {
		res, err := parseVetJSON(strings.NewReader(out), tests)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range res.findings {
			got = append(got, f.pkg+" "+f.posn.String()+" "+f.diag.Message)
		}
		want := []string{"p /m/p/a.go:10:2 first"}
		if tests {
			want = append(want, "p /m/p/a_test.go:1:1 in a test")
		}
		want = append(want, "p /m/p/b.go:3:1 second")
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("tests=%t: findings\n%s\nwant\n%s", tests, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if len(res.errs) != 1 || res.errs[0] != (actionErr{"p", "stcleanup", "it broke"}) {
			t.Errorf("errors %+v, want stcleanup's on p", res.errs)
		}
	}
	if _, err := parseVetJSON(strings.NewReader(`{"p": {"a": 3}}`), true); err == nil {
		t.Error("a diagnostic list that is a number: no error")
	}
}

func TestParsePosn(t *testing.T) {
	for in, want := range map[string]token.Position{
		"/a/b.go:3:7":    {Filename: "/a/b.go", Line: 3, Column: 7},
		"C:/a/b.go:3:7":  {Filename: "C:/a/b.go", Line: 3, Column: 7},
		"/a/b.go:3":      {Filename: "/a/b.go", Line: 3},
		"/a/b.go":        {Filename: "/a/b.go"},
		"/a:x/b.go:12:1": {Filename: "/a:x/b.go", Line: 12, Column: 1},
	} {
		if got := parsePosn(in); got != want {
			t.Errorf("parsePosn(%q) = %+v, want %+v", in, got, want)
		}
	}
}
