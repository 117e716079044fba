package report

import (
	"fmt"
	"math"
	"math/bits"
	"strings"

	"github.com/gpustate/gpustate/contract"
	"github.com/gpustate/gpustate/gen"
	"github.com/gpustate/gpustate/placement"
)

// What the state holds in memory, priced in the blocks runtime/state
// holds it in (docs/INTERNALS.md, "Memory pressure"): on a pool made with
// PoolOptions.BlockBytes 0 each field's blocks hold the same rows
// (placement's rule, or the contract's //state:block rows); on a pool with
// a block size every field gets blocks of that size, except that a state
// sharing prefixes, or one with //state:block rows, keeps the same rows in
// every field.

// maxBlock is the largest block the runtime makes (1 GiB).
const maxBlock = 1 << 30

// fieldBlock is how one field is held: the rows per block the state asks
// for, the rows a block holds (more for a narrow field, whose block rounds
// up to placement.BlockAlign, unless prefixes are shared in whole blocks)
// and a block's bytes.
type fieldBlock struct {
	rows, per int
	bytes     int64
	rowBytes  int64
	sized     bool // blocks follow the rows: a delta's are sized to it
}

// blocksOf returns the blocks of each field of c on a pool of blockBytes
// (0: row-sized blocks), or why c cannot be held at all.
func blocksOf(c *contract.Contract, blockBytes int64) ([]fieldBlock, string) {
	rowSum := gen.RowBytes(c)
	out := make([]fieldBlock, len(c.Fields))
	var rows int // the same in every field; 0 when each field has its own
	switch {
	case blockBytes <= 0 && c.ShareKey != "":
		rows = placement.SharedRows(rowSum, c.BlockRows)
	case blockBytes <= 0:
		rows = placement.BlockRows(rowSum, c.BlockRows)
	case c.BlockRows > 0:
		rows = c.BlockRows
	case c.ShareKey != "":
		rows = math.MaxInt
		for _, f := range c.Fields {
			rows = int(min(int64(rows), alignBlock(blockBytes)/max(f.RowBytes, 1)))
		}
		rows = max(rows, 1)
	}
	for i, f := range c.Fields {
		if rows > 0 {
			bb := placement.FieldBlockBytes(f.RowBytes, rows, maxBlock)
			if bb < 0 {
				return nil, fmt.Sprintf("a block of %d rows of `%s` (%d bytes each) is larger than any block (at most 1 GiB): it fits no device", rows, f.Name, f.RowBytes)
			}
			per := rows
			if c.ShareKey == "" {
				per = int(bb / f.RowBytes)
			}
			out[i] = fieldBlock{rows: rows, per: per, bytes: bb, rowBytes: f.RowBytes, sized: true}
			continue
		}
		bb := alignBlock(blockBytes)
		if f.RowBytes <= 0 || f.RowBytes > bb {
			return nil, fmt.Sprintf("a row of `%s` (%d bytes) is larger than the pool's block of %s: a pool with that BlockBytes cannot hold the state", f.Name, f.RowBytes, gen.Bytes(bb))
		}
		out[i] = fieldBlock{rows: int(bb / f.RowBytes), per: int(bb / f.RowBytes), bytes: bb, rowBytes: f.RowBytes}
	}
	return out, ""
}

// alignBlock rounds a pool's block size as NewPool does.
func alignBlock(bb int64) int64 {
	return (min(bb, maxBlock) + placement.BlockAlign - 1) &^ (placement.BlockAlign - 1)
}

// rowsBytes returns what n rows take in blocks, over every field, counted
// from the start of a block; math.MaxInt64 past it.
func rowsBytes(fbs []fieldBlock, n int64) int64 {
	var total int64
	for _, fb := range fbs {
		blocks := (n + int64(fb.per) - 1) / int64(fb.per)
		if blocks > (math.MaxInt64-total)/fb.bytes {
			return math.MaxInt64
		}
		total += blocks * fb.bytes
	}
	return total
}

// deltaBytes returns what a delta of n rows holds, as runtime/state
// stores it (allocDelta, docs/INTERNALS.md): where blocks follow the rows,
// a delta shorter than a block takes blocks of its own rows, rounded up to
// one of few sizes (deltaRows) and to placement.BlockAlign; otherwise the
// state's own blocks.
func deltaBytes(fbs []fieldBlock, n int64) int64 {
	var total int64
	for _, fb := range fbs {
		per, bytes := int64(fb.per), fb.bytes
		if k := deltaRows(n); fb.sized && k < per {
			bytes = (k*fb.rowBytes + placement.BlockAlign - 1) &^ (placement.BlockAlign - 1)
			per = bytes / fb.rowBytes
		}
		blocks := (n + per - 1) / per
		if blocks > (math.MaxInt64-total)/bytes {
			return math.MaxInt64
		}
		total += blocks * bytes
	}
	return total
}

// deltaRows rounds a delta's rows as the runtime does: exact up to 8
// rows, then four sizes per doubling.
func deltaRows(n int64) int64 {
	if n <= 8 {
		return n
	}
	step := int64(1) << (bits.Len64(uint64(n)) - 3)
	return (n + step - 1) &^ (step - 1)
}

// onPool names the pool the figures are for.
func onPool(blockBytes int64) string {
	if blockBytes <= 0 {
		return "on a pool with row-sized blocks (`PoolOptions.BlockBytes` 0)"
	}
	return fmt.Sprintf("on a pool with `BlockBytes` %d", alignBlock(blockBytes))
}

// blockText prices the state in blocks on a pool of blockBytes: the rows
// per block, what one row and the bound (or the window) take, and a bound
// no device could hold.
func blockText(c *contract.Contract, rowSum, blockBytes int64) string {
	if blockBytes <= 0 {
		// The row-sized rule's own failure reads best without the pool.
		for _, f := range c.Fields {
			if f.RowBytes > maxBlock {
				return fmt.Sprintf("a row of `%s` (%d bytes) is larger than any block (at most 1 GiB): it fits no device", f.Name, f.RowBytes)
			}
		}
	}
	fbs, why := blocksOf(c, blockBytes)
	if why != "" {
		return why
	}
	s := onPool(blockBytes) + ", " + perBlockText(fbs, rowSum) + fmt.Sprintf("; a state of one row takes %s (a block per field)", gen.Bytes(rowsBytes(fbs, 1)))
	limit, what, extra := c.Bound, "the bound", int64(0)
	if c.Window > 0 {
		// A window holds its rows plus the block being filled.
		limit, what, extra = c.Window, "the window", 1
	}
	if c.Unbounded || limit <= 0 {
		return s + ", and the rows have no bound"
	}
	total := rowsBytes(fbs, limit)
	for _, fb := range fbs {
		total = addSat(total, extra*fb.bytes)
	}
	s += fmt.Sprintf(", %s of %d rows %s", what, limit, gen.Bytes(total))
	if total > placement.MaxDeviceBytes {
		s += fmt.Sprintf(": **more than any device holds (%s); this bound can never be reached**", gen.Bytes(placement.MaxDeviceBytes))
	}
	return s
}

// perBlockText states the rows per block: "blocks of 4 rows per field (1
// KiB a block over all fields)" when every field holds the same rows, the
// rows of each field otherwise.
func perBlockText(fbs []fieldBlock, rowSum int64) string {
	same := true
	for _, fb := range fbs {
		same = same && fb.rows == fbs[0].rows
	}
	if same && len(fbs) > 0 {
		unit := "rows"
		if fbs[0].rows == 1 {
			unit = "row"
		}
		return fmt.Sprintf("blocks of %d %s per field (%s a block over all fields)", fbs[0].rows, unit, gen.Bytes(rowSum*int64(fbs[0].rows)))
	}
	parts := make([]string, len(fbs))
	for i, fb := range fbs {
		parts[i] = fmt.Sprint(fb.rows)
	}
	return fmt.Sprintf("blocks of %s each, holding %s rows of each field in turn", gen.Bytes(fbs[0].bytes), strings.Join(parts, ", "))
}

// shareText prices declared prefix sharing: what one more session of a
// domain costs once a prefix is cached.
func shareText(c *contract.Contract, blockBytes int64) string {
	fbs, why := blocksOf(c, blockBytes)
	if why != "" {
		return ""
	}
	rows := fbs[0].rows
	return fmt.Sprintf(" Priced %s: prefixes are shared in whole blocks of %d rows (%s over all fields), held once per domain; "+
		"each further session of the domain that adopts a cached prefix of P rows holds only its rows past the last whole block of P "+
		"(a prefix of fewer than %d rows shares nothing), and cached blocks no head holds stay until evicted.",
		onPool(blockBytes), rows, gen.Bytes(rowsBytes(fbs, int64(rows))), rows)
}

// addSat adds without passing math.MaxInt64.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
