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
		bb   int64 // the pool's BlockBytes
		want []string
		not  []string
	}{
		// 520-byte rows: 1 row per block of 1 KiB of rows; Pos rounds up
		// to 256 bytes (32 rows). 4096 rows: 4096 blocks each of Keys and
		// Values, 128 of Pos.
		{contract.Contract{Fields: kv, Bound: 4096}, 0, []string{"on a pool with row-sized blocks", "blocks of 1 row per field", "a state of one row takes 768 B (a block per field)", "the bound of 4096 rows 2.0 MiB"}, []string{"any device"}},
		{contract.Contract{Fields: kv, Unbounded: true}, 0, []string{"the rows have no bound"}, []string{"any device"}},
		// 1G rows of 520 bytes: past any device.
		{contract.Contract{Fields: kv, Bound: 1 << 30}, 0, []string{"more than any device holds (288 GiB)", "can never be reached"}, nil},
		{contract.Contract{Fields: []contract.Field{{Name: "Huge", RowBytes: 2 << 30}}, Bound: 1}, 0, []string{"`Huge`", "larger than any block", "fits no device"}, nil},
		// A pool of 64 KiB blocks: every field gets whole blocks, 256 rows
		// of Keys and Values, 8192 of Pos; one row takes three blocks, and
		// 4096 rows 16 blocks each of Keys and Values and one of Pos.
		{contract.Contract{Fields: kv, Bound: 4096}, 64 << 10, []string{"on a pool with `BlockBytes` 65536", "blocks of 64 KiB each, holding 256, 256, 8192 rows", "a state of one row takes 192 KiB", "the bound of 4096 rows 2.1 MiB"}, []string{"row-sized"}},
		// Shared prefixes keep the same rows in every field: as many as
		// the widest field's rows fit a block (4 of 256 bytes in 1 KiB),
		// and Pos's 4 rows round up to 256 bytes.
		{contract.Contract{Fields: kv, Bound: 64, ShareKey: "Pos"}, 1 << 10, []string{"blocks of 4 rows per field", "a state of one row takes 2.2 KiB"}, nil},
		// A row wider than the pool's block: the pool cannot hold it.
		{contract.Contract{Fields: []contract.Field{{Name: "Wide", RowBytes: 4096}}, Bound: 8}, 1 << 10, []string{"a row of `Wide` (4096 bytes) is larger than the pool's block of 1 KiB"}, nil},
	} {
		var sum int64
		for _, f := range tc.c.Fields {
			sum += f.RowBytes
		}
		got := blockText(&tc.c, sum, tc.bb)
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
