package state

import "fmt"

// BlockTable is a device-resident table of a state's or snapshot's blocks,
// per column: an array of the blocks' base addresses (little-endian u64,
// one per block, in row order), so that a kernel finds logical row r of a
// column at table[r / RowsPerBlock] + (r % RowsPerBlock) * RowBytes with no
// host round trip (the block tables of paged attention); for a window
// state, at table[r / RowsPerBlock - First] (TableColumn). A snapshot's table
// never changes. A state's follows its writes, rollbacks and merges,
// in stream order (docs/GUIDE.md): entries are only ever added in
// place past those any earlier version had; a change to an entry an
// earlier version had moves the column to a new allocation, so a kernel
// queued with the table of an earlier version (the Ptr Column gave then)
// still reads that version's blocks, and the old allocation is freed once
// the streams recorded on the state are done with it. Take Ptr from Column
// for each launch. When the device fails to bring the table up to date,
// Column reports it until a later call on the state, or Column itself,
// rebuilds it. When the state is evicted or moved to the host tier, its
// blocks are freed: Column rebuilds it or brings it back first, and
// answers the error (ErrEvicted for a state the pool dropped) when it
// cannot. Release it when done; releasing its state or snapshot releases
// it too.
type BlockTable struct {
	impl tableImpl
}

// tableImpl is what the store's block table answers.
type tableImpl interface {
	Column(i int) (TableColumn, error)
	Release() error
}

func errNilTable(op string) error {
	return fmt.Errorf("state: %s on a nil *BlockTable: %w", op, ErrReleased)
}

// Column returns column i's table as it stands. The error is the failure
// to bring the table up to date (after one more try), ErrReleased after
// Release, or ErrRange for a column the state lacks.
func (t *BlockTable) Column(i int) (TableColumn, error) {
	if t == nil {
		return TableColumn{}, errNilTable("Column")
	}
	return t.impl.Column(i)
}

// Release frees the table's device memory (once the streams recorded on
// its state are done with it). Releasing twice does nothing.
//
//state:release
func (t *BlockTable) Release() error {
	if t == nil {
		return errNilTable("Release")
	}
	return t.impl.Release()
}
