package store

import (
	"github.com/gpustate/gpustate/placement"
)

// Block sizes follow the rows. A pool made with PoolOptions.BlockBytes 0
// gives each column of each layout blocks of rows-per-block times its row
// bytes (rounded up to blockAlign), so a column of 8-byte rows and one of
// 2 KiB rows hold the same rows per block without the narrow one wasting a
// wide block. Each size is a size class with free lists of its own; every
// class carves its blocks from the same slabs, and free blocks of one
// class go back to the slabs for another under memory pressure (slab.go).
//
// Rows per block: Layout.BlockRows when set (the contract's
// `//state:block rows=N`); else, on a row-sized pool, as many rows as make
// defaultBlockRowBytes over all columns, at least one: one row for rows of
// 1 KiB and more, so that a one-row session costs its row rounded up to
// blockAlign per column, and few rows below that, so that a beam's or a
// delta's partial block wastes little; else (PoolOptions.BlockBytes set)
// the pool's one block size for every column, as before. Narrow columns
// round up to blockAlign and so hold more rows per block than wide ones.
//
// The figures, measured by TestRowSizedBlockFigures: a one-row session at
// most 2x its logical bytes for rows of 1 KiB and more, a 64-way beam
// search within 1.2x of the ideal, checkpoint history at most 2x the bytes
// its deltas change. 2 KiB of rows per block already misses the beam
// figure for short beams (1.33x).

// defaultBlockRowBytes is the bytes of rows, over all columns, a default
// block holds; the rule is placement's, which the report shares.
const defaultBlockRowBytes = placement.DefaultBlockRowBytes

// blockSizes is how a pool sizes the blocks of a layout's columns.
type blockSizes struct {
	blockBytes int // the pool's own block size
	// rowSized: the pool was made with BlockBytes 0, and each layout's
	// block size follows its rows.
	rowSized bool
}

// blockRows returns the rows per block of l: 0 when the pool's own block
// size applies.
func (p *blockSizes) blockRows(l *Layout) int {
	if l.BlockRows > 0 {
		return l.BlockRows
	}
	if !p.rowSized && l.ShareKey != "" {
		// Shared blocks hold the same rows in every column, so that a
		// prefix of whole blocks is whole in each: as many as the widest
		// column's rows fit the pool's block.
		rows := maxInt
		for _, c := range l.Columns {
			rows = min(rows, p.blockBytes/c.rowBytes())
		}
		return max(rows, 1)
	}
	if !p.rowSized {
		return 0
	}
	var sum int64
	for _, c := range l.Columns {
		sum += int64(c.rowBytes())
	}
	if l.ShareKey != "" {
		return placement.SharedRows(sum, 0)
	}
	return placement.BlockRows(sum, 0)
}

// columnBlockBytes returns the block size of each column of l. The
// layout is checked: every row size is positive and at most 1 GiB.
func (p *blockSizes) columnBlockBytes(l *Layout) []int {
	rows := p.blockRows(l)
	out := make([]int, len(l.Columns))
	for i, c := range l.Columns {
		if rows == 0 {
			out[i] = p.blockBytes
			continue
		}
		bb := placement.FieldBlockBytes(int64(c.rowBytes()), rows, maxBlockBytes)
		if bb < 0 {
			bb = maxBlockBytes // a block of one row at most, which the layout check allows
		}
		out[i] = int(bb)
	}
	return out
}
