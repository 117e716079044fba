package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestOrderOfFinishing: a package that finishes first is printed first,
// whatever the order go test was given; a failed package's output is
// printed whole, a passing one's summary alone; a build failure's output
// is printed; the heartbeat names what still runs.
func TestOrderOfFinishing(t *testing.T) {
	events := `{"Action":"start","Package":"slow"}
{"Action":"start","Package":"fast"}
{"Action":"start","Package":"bad"}
{"Action":"run","Package":"fast","Test":"TestA"}
{"Action":"output","Package":"fast","Test":"TestA","Output":"=== RUN TestA\n"}
{"Action":"pass","Package":"fast","Test":"TestA","Elapsed":0.1}
{"Action":"output","Package":"fast","Output":"ok  \tfast\t0.100s\n"}
{"Action":"pass","Package":"fast","Elapsed":0.1}
{"Action":"output","Package":"bad","Test":"TestB","Output":"    bad_test.go:9: want 1, have 2\n"}
{"Action":"fail","Package":"bad","Test":"TestB","Elapsed":0.2}
{"Action":"output","Package":"bad","Output":"FAIL\n"}
{"Action":"output","Package":"bad","Output":"FAIL\tbad\t0.200s\n"}
{"Action":"fail","Package":"bad","Elapsed":0.2}
{"ImportPath":"broken [broken.test]","Action":"build-output","Output":"broken/x.go:3:1: syntax error\n"}
{"ImportPath":"broken [broken.test]","Action":"build-fail"}
{"Action":"output","Package":"empty","Output":"?   \tempty\t[no test files]\n"}
{"Action":"skip","Package":"empty","Elapsed":0}
`
	var out bytes.Buffer
	now := time.Unix(1000, 0)
	p := newPrinter(&out, func() time.Time { return now })
	for i, line := range strings.SplitAfter(events, "\n") {
		if err := p.read(strings.NewReader(line)); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			now = now.Add(75 * time.Second)
			if got := p.running(); got != "still running: bad (1m15s), fast (1m15s), slow (1m15s)" {
				t.Errorf("heartbeat: %q", got)
			}
		}
	}
	want := "ok  \tfast\t0.100s\n" +
		"    bad_test.go:9: want 1, have 2\nFAIL\nFAIL\tbad\t0.200s\n" +
		"broken/x.go:3:1: syntax error\n" +
		"?   \tempty\t[no test files]\n"
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
	if !p.failed {
		t.Error("a failed package did not fail the run")
	}
	if got := p.running(); got != "still running: slow (1m15s)" {
		t.Errorf("after the others finished: %q", got)
	}
}
