package placement

// The block-size rule runtime/state applies to a pool made with no block
// size and that stategen's report prices memory by: each field's blocks
// hold the same rows, about DefaultBlockRowBytes of rows over all fields
// (at least one row), each field's block rounded up to BlockAlign.

// BlockAlign is the alignment of every block's size.
const BlockAlign = 256

// DefaultBlockRowBytes is the bytes of rows, over all fields, a default
// block holds.
const DefaultBlockRowBytes = 1024

// MaxDeviceBytes is the most memory any one accelerator holds today
// (288 GiB): a state that needs more at its bound fits no device.
const MaxDeviceBytes = 288 << 30

// BlockRows returns the rows per block of a state whose rows sum to
// rowSum bytes over its fields: rows when positive (a //state:block
// directive), else the default rule.
func BlockRows(rowSum int64, rows int) int {
	if rows > 0 {
		return rows
	}
	if rowSum <= 0 || rowSum >= DefaultBlockRowBytes {
		return 1
	}
	return int(DefaultBlockRowBytes / rowSum)
}

// SharedBlockRows is the fewest rows per block of a state that shares
// prefixes (//state:share prefix) and sets no //state:block rows: a
// prefix is shared in whole blocks, so blocks of one or two wide rows
// would cost a hash chain entry per row and round every narrow field (the
// key) up to BlockAlign per row; 16 rows is the block of vLLM's paged
// attention.
const SharedBlockRows = 16

// SharedRows returns the rows per block of a state that shares prefixes:
// BlockRows, raised to SharedBlockRows unless rows (a //state:block
// directive) is set.
func SharedRows(rowSum int64, rows int) int {
	if rows > 0 {
		return rows
	}
	return max(BlockRows(rowSum, 0), SharedBlockRows)
}

// FieldBlockBytes returns the block size of a field of rowBytes-byte rows
// at rows per block: rows*rowBytes rounded up to BlockAlign, or -1 when
// that exceeds limit.
func FieldBlockBytes(rowBytes int64, rows int, limit int64) int64 {
	if rowBytes <= 0 || int64(rows) > limit/rowBytes {
		return -1
	}
	return (int64(rows)*rowBytes + BlockAlign - 1) &^ (BlockAlign - 1)
}
