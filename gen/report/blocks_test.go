package report

import (
	"strings"
	"testing"

	"github.com/gpustate/gpustate/contract"
)

// TestBlockText: the report prices a state in the blocks runtime/state
// holds it in, and flags a bound no device could hold.
func TestBlockText(t *testing.T) {
	kv := []contract.Field{{Name: "Keys", RowBytes: 256}, {Name: "Values", RowBytes: 256}, {Name: "Pos", RowBytes: 8}}
	for _, tc := range []struct {
		c    contract.Contract
		want []string
		not  []string
	}{
		// 520-byte rows: 1 row per block of 1 KiB of rows; Pos rounds up
		// to 256 bytes (32 rows). 4096 rows: 4096 blocks each of Keys and
		// Values, 128 of Pos.
		{contract.Contract{Fields: kv, Bound: 4096}, []string{"blocks of 1 row per field", "a state of one row takes 768 B (a block per field)", "the bound of 4096 rows 2.0 MiB"}, []string{"any device"}},
		{contract.Contract{Fields: kv, Unbounded: true}, []string{"the rows have no bound"}, []string{"any device"}},
		// 1G rows of 520 bytes: past any device.
		{contract.Contract{Fields: kv, Bound: 1 << 30}, []string{"more than any device holds (288 GiB)", "can never be reached"}, nil},
		{contract.Contract{Fields: []contract.Field{{Name: "Huge", RowBytes: 2 << 30}}, Bound: 1}, []string{"`Huge`", "larger than any block", "fits no device"}, nil},
	} {
		var sum int64
		for _, f := range tc.c.Fields {
			sum += f.RowBytes
		}
		got := blockText(&tc.c, sum)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%q lacks %q", got, w)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(got, w) {
				t.Errorf("%q says %q", got, w)
			}
		}
	}
}
