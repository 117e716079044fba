package contract

import (
	"strings"
	"testing"
)

const windowSrc = `package p

const W = 1 << 10

// Replay is a replay buffer.
//
//state:contract
//state:growth append window=4*W
//state:owner process
//state:retention optional
//state:block rows=64
type Replay struct {
	Obs    []float32 ` + "`state:\"width=8\"`" + `
	Reward []float32
}
`

func TestWindowAndBlock(t *testing.T) {
	fset, p := parse(t, windowSrc)
	if d := diags(fset, p); len(d) != 0 {
		t.Fatalf("diagnostics on a valid window contract:\n%s", strings.Join(d, "\n"))
	}
	c := p.Contracts[0]
	if !c.Valid || c.Growth != GrowthAppend || c.Window != 4096 || c.Bound != 0 || c.Unbounded || c.BlockRows != 64 {
		t.Errorf("contract = %+v; want valid append, Window 4096, Bound 0, BlockRows 64", c)
	}
}

func TestWindowErrors(t *testing.T) {
	cases := []struct{ lines, want string }{
		{"growth mutable window=8", "4: stcontract: window applies only to append growth, and T is mutable"},
		{"growth append bound=8 window=8", "4: stcontract: growth of T has both bound= and window="},
		{"growth append window=8 reason=\"x\"", "4: stcontract: reason applies only to bound=unbounded"},
		{"growth append window=0", "4: stcontract: window \"0\" of T is 0; a window must be a positive number of rows"},
		{"growth append window=-2", "is -2; a window must be a positive"},
		{"growth append window=Nope", "window \"Nope\" of T"},
		{"growth append window=8\n//state:checkpoint every=2 keep=2", "5: stcontract: //state:checkpoint of T cannot keep the history of a window"},
		{"growth append window=1<<60", "keeps a window of"},
		{"growth append window=8\n//state:block", "5: stcontract: //state:block of T needs rows=N"},
		{"growth append window=8\n//state:block rows=0", "5: stcontract: block rows \"0\" of T is 0"},
		{"growth append window=8\n//state:block rows=1<<30", "rows per block must be between 1 and"},
		{"growth append window=8\n//state:block rows=x", "block rows \"x\" of T"},
		{"growth append window=8\n//state:block 16", "unexpected argument \"16\" in //state:block of T; write rows=N"},
		{"growth append window=8\n//state:block rows=4\n//state:block rows=8", "6: stcontract: repeated //state:block"},
	}
	for _, tc := range cases {
		src := "package p\n//state:contract\n//state:owner s\n//state:" + tc.lines + "\ntype T struct{ X []int64 `state:\"width=4\"` }\n"
		fset, p := parse(t, src)
		d := strings.Join(diags(fset, p), "\n")
		if !strings.Contains(d, tc.want) {
			t.Errorf("%q:\ngot  %s\nwant %s", tc.lines, d, tc.want)
		}
		if len(p.Contracts) != 1 || p.Contracts[0].Valid {
			t.Errorf("%q: contract reported valid", tc.lines)
		}
	}
}
